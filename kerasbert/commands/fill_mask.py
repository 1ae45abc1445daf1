"""`kerasbert fill-mask`: the most likely tokens for each mask in a text,
from a published masked-LM checkpoint or a pretraining run.

    kerasbert fill-mask --model hf://google-bert/bert-base-uncased \\
        --text "Paris is the [MASK] of France." [--top-k 5] [--vocab PATH]
"""

import json

from kerasbert.commands._args import positive_int
from kerasbert.errors import UsageError

NAME = "fill-mask"
HELP = "Predict the masked tokens of a text with a masked-LM model (hf://..., a run, ...)."
DESCRIPTION = ("Prints one JSON line per text: for each mask token in it ([MASK]; <mask> for "
               "RoBERTa's BPE), the top-k tokens and their probabilities.")


def add_arguments(parser):
    parser.add_argument("--model", required=True, metavar="HANDLE_OR_RUN",
                        help="A Hugging Face masked-LM checkpoint (hf://..., a directory) or a "
                        "kerasbert pretraining run / pretrainer.keras.")
    parser.add_argument("--text", required=True, action="append",
                        help="Text with one or more mask tokens (repeat for several texts).")
    parser.add_argument("--top-k", type=positive_int, default=5)
    parser.add_argument("--vocab", default=None,
                        help="Tokenizer files (default: the model's own).")
    parser.add_argument("--max-seq-length", dest="sequence_length", type=positive_int, default=128)
    return parser


def run(args):
    # lazy: keras and tensorflow (so `kerasbert --help` stays instant)
    from kerasbert.loading.masked_lm import fill_mask, load_masked_lm_from_handle
    from kerasbert.text.tokenizer_loading import load_tokenizer

    if args.top_k < 1:
        raise UsageError(f"--top-k must be >= 1, got {args.top_k}.")
    pretrainer = load_masked_lm_from_handle(args.model)
    tokenizer = load_tokenizer(args.vocab or args.model)
    if tokenizer.vocabulary_size != pretrainer.backbone.vocabulary_size:
        raise UsageError(f"The tokenizer has {tokenizer.vocabulary_size} tokens, the model "
                         f"{pretrainer.backbone.vocabulary_size}: not its vocabulary.")
    try:
        results = fill_mask(pretrainer, tokenizer, args.text, args.top_k, args.sequence_length)
    except ValueError as err:
        raise UsageError(str(err)) from None
    for text, masks in zip(args.text, results):
        print(json.dumps({"text": text, "masks": [[{"token": t, "probability": round(p, 6)}
                                                    for t, p in mask] for mask in masks]},
                         ensure_ascii=False))
