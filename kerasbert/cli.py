"""`kerasbert <command>`: the command-line entry point.

Exit codes: 0 success, 2 bad usage or bad input (unknown preset, bad
override, ...), 1 unexpected failure.
"""

import argparse
import errno
import importlib
import os
import sys

from kerasbert.errors import UsageError

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Modules that add sub-commands: each has `register(subparsers)`, which adds
# its parser and sets `func`. They import heavy libraries only inside `func`,
# so `kerasbert --help` stays instant.
COMMAND_MODULES = (
    "kerasbert.text.vocab_command",
    "kerasbert.data.create_command",
    "kerasbert.training.pretrain_command",
    "kerasbert.data.finetuning.create_command",
    "kerasbert.tasks.extract_features_command",
    "kerasbert.tasks.generate_command",
    "kerasbert.training.finetune_command",
    "kerasbert.training.distill_command",
    "kerasbert.serving.export_command",
    "kerasbert.serving.hub_command",
    "kerasbert.serving.predict_command",
)


def cmd_info(args):
    from kerasbert.models import presets  # lazy: keeps `kerasbert --help` instant

    backbone = presets.build_backbone(args.preset, presets.parse_overrides(args.set))
    print(f"preset {args.preset}")
    print(backbone.describe())


def cmd_presets(args):
    from kerasbert.models import get_preset
    from kerasbert.models.presets import presets_by_family

    for family, names in presets_by_family().items():
        print(f"{family}:")
        for name in names:
            print(f"  {name:<22} {get_preset(name)['description']}")


def cmd_demo(args):
    from kerasbert.demo import run_demo

    run_demo(args.output_dir, quick=args.quick)


def make_parser():
    parser = argparse.ArgumentParser(
        prog="kerasbert",
        description="BERT and its family for Keras 3: presets, conversion, "
        "pretraining, fine-tuning, export.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    info = sub.add_parser("info", help="Print a preset's architecture and size.")
    info.add_argument("--preset", required=True, help="e.g. bert_base")
    info.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="Override a config value (repeatable), e.g. --set num_layers=4",
    )
    info.set_defaults(func=cmd_info)

    presets = sub.add_parser("presets", help="List every preset.")
    presets.set_defaults(func=cmd_presets)

    demo = sub.add_parser("demo", help="End to end, offline: model checks, then vocabulary -> "
                          "pretraining data -> pretraining on the built-in corpus.")
    demo.add_argument("--output-dir", default="runs/demo")
    demo.add_argument("--quick", action="store_true",
                      help="Tiny corpus and 20 steps (what the tests run).")
    demo.set_defaults(func=cmd_demo)

    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    return parser


# OS errors a user causes (a path that is missing, of the wrong kind or not
# theirs; a full or read-only disk): reported like a UsageError. Any other
# exception is a bug: it keeps its traceback and exits 1.
USER_ERRNOS = frozenset({errno.ENOENT, errno.EEXIST, errno.EISDIR, errno.ENOTDIR, errno.EACCES,
                         errno.EPERM, errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.ENAMETOOLONG,
                         errno.ENOTEMPTY})


def report_error(prog, err):
    """`prog: error: MESSAGE` on one line of stderr."""
    message = " ".join(str(err).split()) or type(err).__name__
    print(f"{prog}: error: {message}", file=sys.stderr)


def run_reporting_errors(func, args, prog):
    """Runs a command and returns its exit code: 0 on success; 2 with one
    line `prog: error: ...` (no traceback) for the package's own errors and
    the OS errors a user causes; 130 on Ctrl-C. Other exceptions propagate
    (traceback, exit 1), so bugs stay visible."""
    try:
        func(args)
    except UsageError as err:
        report_error(prog, err)
        return 2
    except OSError as err:
        if err.errno not in USER_ERRNOS:
            raise
        report_error(prog, err)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    return 0


def check_arguments_are_text(argv, prog):
    """Python turns undecodable bytes of the command line into lone
    surrogates, which fail much later (in a tokenizer, in a JSON file).
    Refuses them up front: returns an error message or None."""
    for position, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raw = os.fsencode(arg)
            return (f"{prog}: error: argument {position} ({raw!r}) is not valid UTF-8 text; "
                    "pass file names and text in UTF-8.")
    return None


def script_main(command_module, prog, description, argv=None):
    """`main` of a thin script (tfrecords/*.py) over a command module that
    has `add_arguments(parser)` and `run(args)`: same flags, same errors."""
    module = importlib.import_module(command_module)
    parser = module.add_arguments(argparse.ArgumentParser(prog=prog, description=description))
    argv = sys.argv[1:] if argv is None else argv
    problem = check_arguments_are_text(argv, prog)
    if problem:
        print(problem, file=sys.stderr)
        return 2
    return run_reporting_errors(module.run, parser.parse_args(argv), prog)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    problem = check_arguments_are_text(argv, "kerasbert")
    if problem:
        print(problem, file=sys.stderr)
        return 2
    parser = make_parser()
    args = parser.parse_args(argv)
    return run_reporting_errors(args.func, args, f"kerasbert {args.command}")


if __name__ == "__main__":
    sys.exit(main())
