"""`kerasbert export-hub`: TF Hub-format preprocessor + encoder SavedModels."""

from kerasbert.commands._args import positive_int
from kerasbert.commands._args import add_tokenizer_switches
from kerasbert.commands._args import tokenizer_switches
from kerasbert.io_utils import output_lock

NAME = "export-hub"
HELP = "Export a backbone as TF Hub-format preprocess/ and encoder/ SavedModels."
DESCRIPTION = (
    "Writes OUTPUT/preprocess (strings -> BERT inputs; .tokenize, "
    ".bert_pack_inputs) and OUTPUT/encoder (pooled_output, sequence_output, "
    "encoder_outputs, default; .mlm with mlm_logits), used like the TF Hub BERT "
    "models (hub.KerasLayer, tf.saved_model.load). Loading them needs only "
    "tensorflow and tensorflow_text.")


def run(args):
    # lazy: tensorflow (so `kerasbert --help` does not load it)
    from kerasbert.serving.hub_export import export_hub

    with output_lock(args.output, kind="folder", flag="--output"):
        paths = export_hub(
            args.backbone, args.vocab, args.output, lower_case=False if args.cased else None,
            sequence_length=args.sequence_length, pretrainer_path=args.pretrainer,
            include_mlm=not args.no_mlm, overwrite=args.overwrite,
            tokenizer_switches=tokenizer_switches(args),
        )
    for name, path in paths.items():
        print(f"wrote {name}: {path}")


def add_arguments(parser):
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--backbone", metavar="PATH",
                       help="RUN/backbone.keras (a saved pretrainer or task model works too).")
    model.add_argument("--preset", dest="backbone", metavar="HANDLE",
                       help="Published weights: hf://OWNER/NAME[@REV], kaggle://..., a model "
                       "directory (Hugging Face, keras-hub, google-research/bert, TF Hub) or a "
                       "run directory; its tokenizer comes along.")
    parser.add_argument("--vocab", default=None, metavar="PATH",
                        help="The tokenizer the backbone was trained with: a WordPiece vocab.txt, "
                        "a SentencePiece .model (ALBERT) or a directory with vocab.json + "
                        "merges.txt (RoBERTa). Default: the --preset handle's own files.")
    parser.add_argument("--output", required=True, metavar="DIR",
                        help="Directory to create (preprocess/ and encoder/ inside).")
    parser.add_argument("--cased", action="store_true",
                        help="Cased tokenization (default: the tokenizer source's setting, "
                        "else lower case and strip accents).")
    add_tokenizer_switches(parser)
    parser.add_argument("--seq-length", dest="sequence_length", type=positive_int, default=128, metavar="T",
                        help="Length the preprocessor pads to; bert_pack_inputs' default "
                        "(default 128).")
    parser.add_argument("--pretrainer", metavar="PATH",
                        help="The pretrainer whose MLM head .mlm uses (default: "
                        "pretrainer.keras next to --backbone).")
    parser.add_argument("--no-mlm", action="store_true",
                        help="No .mlm sub-object (no pretrainer needed).")
    parser.add_argument("--overwrite", action="store_true",
                        help="Replace an existing --output.")
    return parser
