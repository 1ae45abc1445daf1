"""`kerasbert extract-features`: contextual token embeddings as JSON lines.

    kerasbert extract-features --backbone runs/demo/backbone.keras \
        --vocab vocab.txt --input sentences.txt --layers -1,-2,-3,-4 \
        --max-seq-length 128 --batch-size 32 --output features.jsonl

The output format is google-research/bert `extract_features.py`'s (see
`kerasbert.data.feature_extraction`). It is written to a temporary file
beside --output and renamed when complete. TensorFlow is imported only when
the command runs.

The backbone flags and loading are shared with `finetune`
(kerasbert.loading.backbones). An ELMo biLM (`--preset elmo_original`, or
`--preset DIR` of its options.json + weights.hdf5) needs no --vocab: it
reads characters, and its records hold words and its layers
(`kerasbert.data.elmo_feature_extraction`; --max-seq-length counts words).
"""

import os
import re

from kerasbert.commands._args import positive_int
from kerasbert.errors import UsageError
from kerasbert.commands._args import add_backbone_arguments
from kerasbert.commands._args import add_tokenizer_arguments
from kerasbert.text.character_tokenizer import given_token_options
from kerasbert.text.character_tokenizer import refuse_token_options
from kerasbert.commands._args import tokenizer_switches
from kerasbert.commands._args import TOKENIZER_HELP
from kerasbert.commands._args import load_backbone_from_args
from kerasbert.io_utils import atomic_file
from kerasbert.text.text_files import check_utf8_text
from kerasbert.text.text_files import read_lines


NAME = "extract-features"
HELP = "Contextual token embeddings from chosen layers, as JSON lines."
DESCRIPTION = (
    "Each input line (text, or 'text_a ||| text_b') -> one JSON object with "
    "every token's vectors from the chosen encoder layers (google-research/bert "
    "extract_features.py format).")


def add_arguments(parser):
    # `--layers -1,-2` (the value starts with "-"): let the parser read
    # "-1,-2,..." as a value, as it reads "-1" (argparse only knows plain
    # negative numbers; `--layers=-1,-2` works anyway).
    parser._negative_number_matcher = re.compile(r"^-\d+(\s*,\s*-?\d+)*$|^-\d*\.\d+$")
    add_backbone_arguments(parser)
    add_tokenizer_arguments(parser, required=False,
                            help="The backbone's tokenizer (default: the --preset handle's or "
                            "--backbone run's own files). " + TOKENIZER_HELP)
    parser.add_argument("--input", required=True,
                        help="UTF-8 text file: one text per line, or a pair as 'text_a ||| text_b'.")
    parser.add_argument("--layers", default=None,
                        help="encoder_outputs indices, comma-separated (-1 = top layer; default "
                        "-1,-2,-3,-4; ELMo: -1,-2,-3, all of its layers).")
    parser.add_argument("--max-seq-length", dest="sequence_length", type=positive_int, default=128,
                        help="Longer inputs are truncated (the count is reported).")
    parser.add_argument("--batch-size", type=positive_int, default=32)
    parser.add_argument("--output", required=True, help="Output JSON-lines file.")
    return parser


def _read_lines(path):
    from kerasbert.data.feature_extraction import parse_line  # lazy: numpy

    for line in read_lines(path):
        yield parse_line(line)


def run(args):
    import json

    # lazy: numpy
    from kerasbert.data.feature_extraction import check_layers, extract_features, parse_layers

    layers = parse_layers(args.layers or "-1,-2,-3,-4")
    # lazy: tensorflow (the tokenizers, the run directory's default --vocab)
    from kerasbert.runs import default_vocab
    from kerasbert.text.tokenizer_paths import resolve_tokenizer_path
    from kerasbert.text.tokenizer_loading import load_tokenizer

    if args.vocab and os.path.isfile(args.vocab):
        resolve_tokenizer_path(args.vocab)  # names a missing file
    elif args.vocab and not os.path.exists(args.vocab) and "://" not in args.vocab:
        raise UsageError(f"--vocab {args.vocab}: not found.")
    if not os.path.isfile(args.input):
        raise UsageError(f"Input file not found: {args.input}")
    if args.batch_size < 1:
        raise UsageError(f"--batch-size must be at least 1, got {args.batch_size}.")
    if args.sequence_length < 3:
        raise UsageError(f"--max-seq-length must be at least 3, got {args.sequence_length}.")
    check_utf8_text([args.input])  # names the byte offset; refuses an input without text
    backbone = load_backbone_from_args(args)
    if "input_char_ids" in backbone.input:  # ELMo: characters in, words out
        refuse_token_options(args.preset or args.backbone or args.init_checkpoint,
                             given_token_options({"vocab": args.vocab, **tokenizer_switches(args)}))
        return _run_elmo(args, backbone)
    num_layers = getattr(backbone, "num_layers", None) or len(backbone.output["encoder_outputs"])
    check_layers(layers, int(num_layers))

    vocab = args.vocab or default_vocab(args.preset, args.backbone, args.init_checkpoint)
    tokenizer = load_tokenizer(vocab, lower_case=args.do_lower_case,
                               **tokenizer_switches(args))
    stats = {}
    with atomic_file(args.output) as tmp, open(tmp, "w", encoding="utf-8") as out:
        for record in extract_features(backbone, tokenizer, _read_lines(args.input), layers,
                                       args.sequence_length, args.batch_size, stats=stats):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(
        f"Wrote features of {stats.get('num_texts', 0)} line(s), layers {','.join(map(str, layers))}, "
        f"to {args.output}; {stats.get('truncated', 0)} truncated to --max-seq-length "
        f"{args.sequence_length}."
    )


def _run_elmo(args, backbone):
    import json

    # lazy: tensorflow (the character ids are made in TensorFlow ops)
    from kerasbert.data.elmo_feature_extraction import extract_elmo_features
    from kerasbert.data.feature_extraction import parse_layers

    layers = parse_layers(args.layers or "-1,-2,-3")
    stats = {}
    with atomic_file(args.output) as tmp, open(tmp, "w", encoding="utf-8") as out:
        for record in extract_elmo_features(backbone, read_lines(args.input), layers,
                                            args.sequence_length, args.batch_size, stats=stats):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"Wrote ELMo features of {stats.get('num_texts', 0)} line(s), layers "
          f"{','.join(map(str, layers))}, to {args.output}; {stats.get('truncated', 0)} cut to "
          f"--max-seq-length {args.sequence_length} words.")
