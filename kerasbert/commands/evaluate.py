"""`kerasbert evaluate`: the metrics of a fine-tuned model on a split or a
file, printed and kept in the run directory."""

from kerasbert.commands._args import positive_int
from kerasbert import runs
from kerasbert.commands._report import print_metrics

NAME = "evaluate"
HELP = "Metrics of a fine-tuned model on a split or file."


def run(args):
    from kerasbert.training.finetune import run_evaluation  # lazy: tensorflow

    metrics = run_evaluation(args.model, task=args.task, split=args.split,
                             batch_size=args.batch_size, predictions_file=args.predictions)
    print(f"{args.model} on {args.task or 'its task'} "
          f"({args.split or 'its own validation data'}):")
    print_metrics(metrics)
    path = runs.write_json(args.model, runs.EVALUATION,
                           {"task": args.task, "split": args.split, "metrics": metrics})
    print(f"  written to {path}")
    if args.predictions:
        print(f"  predictions written to {args.predictions}")


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="The finetune --output-dir.")
    parser.add_argument("--task", default=None, help="Default: the task it was fine-tuned on.")
    parser.add_argument("--split", default=None,
                        help="TFDS split name or a file (default: the validation data the "
                        "model was fine-tuned with).")
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument("--predictions", default=None, metavar="FILE",
                        help="text2text: write the generated texts to FILE, one line per "
                        "example in the data's order (e.g. to score them with sacrebleu).")
    return parser
