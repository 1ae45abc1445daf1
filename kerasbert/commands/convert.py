"""`kerasbert convert`: write a model in a peer's layout (Hugging Face,
keras-hub, google-research/bert TF1, TF Hub)."""

from kerasbert.io_utils import output_lock

NAME = "convert"
HELP = "Write a pretrained or fine-tuned model as hf, keras-hub, tf1 or tf-hub files."
DESCRIPTION = ("Reads --model (a run directory, .keras file, hf://, kaggle:// or model "
               "directory) and writes it, with its tokenizer, in the layout the peer library "
               "loads: a Hugging Face model directory, a keras-hub preset, a google-research/bert "
               "checkpoint directory, or a TF Hub preprocess/ + encoder/ pair.")


def add_arguments(parser):
    parser.add_argument("--model", required=True, metavar="RUN_OR_HANDLE")
    parser.add_argument("--to", required=True, choices=("hf", "keras-hub", "tf1", "tf-hub"))
    parser.add_argument("--output", required=True, metavar="DIR", help="Directory to create.")
    parser.add_argument("--vocab", default=None,
                        help="Tokenizer files (default: the model's own: its run directory "
                        "or handle).")
    parser.add_argument("--no-lower-case", dest="lower_case", action="store_false", default=None,
                        help="Cased tokenizer (default: the source's setting).")
    parser.add_argument("--overwrite", action="store_true", help="Replace an existing --output.")
    return parser


def run(args):
    # lazy: tensorflow and keras (so `kerasbert --help` does not load them)
    from kerasbert.serving.model_conversion import convert_model

    with output_lock(args.output, kind="folder", flag="--output"):
        path = convert_model(args.model, args.to, args.output, vocab=args.vocab,
                             lower_case=args.lower_case, overwrite=args.overwrite)
    print(f"wrote {args.to}: {path}")
