"""`kerasbert demo`: the offline end-to-end tour `make demo` runs."""

NAME = "demo"
HELP = ("End to end, offline: model checks, then vocabulary -> pretraining data -> "
        "pretraining on the built-in corpus.")


def run(args):
    from kerasbert.demo import run_demo  # lazy: tensorflow

    run_demo(args.output_dir, quick=args.quick)


def add_arguments(parser):
    parser.add_argument("--output-dir", default="runs/demo")
    parser.add_argument("--quick", action="store_true",
                        help="Tiny corpus and 20 steps (what the tests run).")
    return parser
