"""`kerasbert vocab`: build a WordPiece, byte-level BPE or SentencePiece
vocabulary from text files."""

import os

from kerasbert.commands._args import positive_int
from kerasbert.errors import UsageError
from kerasbert.io_utils import check_output_kind
from kerasbert.text.text_files import check_utf8_text


NAME = "vocab"
HELP = "Build a vocabulary (WordPiece, byte-level BPE or SentencePiece) from text files."
DESCRIPTION = (
    "wordpiece: counts BERT-pretokenized words in UTF-8 text files and "
    "learns a WordPiece vocabulary starting with [PAD] [UNK] [CLS] [SEP] "
    "[MASK]; every character seen (each CJK ideograph included) gets a "
    "token. bpe: RoBERTa's byte-level BPE. sentencepiece: ALBERT's unigram model.")


def run(args):
    missing = [f for f in args.input if not os.path.isfile(f)]
    if missing:
        raise UsageError(f"--input file(s) not found: {', '.join(missing)}")
    if args.vocab_size <= 0:
        raise UsageError(f"--vocab-size must be positive, got {args.vocab_size}.")
    # Every type: not UTF-8 or no text at all is refused before training
    # (BPE would otherwise write a vocabulary of bytes only, with exit 0).
    check_utf8_text(args.input)
    build = {"wordpiece": _wordpiece, "bpe": _bpe, "sentencepiece": _sentencepiece}[args.type]
    # wordpiece writes the file --output, bpe the folder --output,
    # sentencepiece the files --output.model and --output.vocab.
    check_output_kind(args.output, "folder" if args.type == "bpe" else "file", "--output")
    try:
        print(build(args))
    except ValueError as err:
        raise UsageError(str(err)) from None


def _wordpiece(args):
    # lazy: tensorflow (so `kerasbert --help` does not load it)
    from kerasbert.text import vocabulary, wordpiece_training

    tokens = wordpiece_training.build_wordpiece_vocab(
        args.input, args.vocab_size, lower_case=args.lower_case,
        show_progress=None if args.progress else False,
    )
    vocabulary.write_vocab(tokens, args.output)
    casing = "uncased" if args.lower_case else "cased"
    return f"wrote {len(tokens)} tokens ({casing}) to {args.output}"


def _bpe(args):
    from kerasbert.text.bpe_training import train_bpe  # lazy: optional dependency

    files = train_bpe(args.input, args.vocab_size, args.output)
    return f"wrote a byte-level BPE vocabulary (RoBERTa layout) to {_describe(files)}"


def _sentencepiece(args):
    # lazy: optional dependency
    from kerasbert.text.sentencepiece_training import train_sentencepiece

    files = train_sentencepiece(args.input, args.vocab_size, args.output,
                                lower_case=args.lower_case)
    return f"wrote a SentencePiece model (ALBERT layout) to {_describe(files)}"


def _describe(files):
    if isinstance(files, dict):
        return ", ".join(str(v) for v in files.values())
    if isinstance(files, (list, tuple)):
        return ", ".join(str(v) for v in files)
    return str(files)


def add_arguments(parser):
    parser.add_argument("--input", nargs="+", required=True, metavar="FILE",
                        help="UTF-8 text files (any line layout). A file with a byte that is "
                        "not UTF-8 is refused (exit 2, naming the file and the byte offset), "
                        "as are inputs with no text; nothing is written then.")
    parser.add_argument("--vocab-size", type=positive_int, required=True, metavar="N",
                        help="Maximum number of tokens, e.g. 30522.")
    parser.add_argument("--type", choices=("wordpiece", "bpe", "sentencepiece"),
                        default="wordpiece",
                        help="wordpiece (BERT, DistilBERT, ELECTRA: vocab.txt), bpe (RoBERTa: "
                        "byte-level BPE, vocab.json + merges.txt in --output DIR) or "
                        "sentencepiece (ALBERT: --output PREFIX -> PREFIX.model, PREFIX.vocab).")
    parser.add_argument("--output", required=True,
                        help="vocab.txt (wordpiece), a directory (bpe) or a prefix (sentencepiece).")
    parser.add_argument("--no-lower-case", dest="lower_case", action="store_false",
                        help="Cased vocabulary (default: lower case, strip accents).")
    parser.add_argument("--no-progress", dest="progress", action="store_false",
                        help="No progress bar (default: shown for inputs over 8 MB).")
    parser.set_defaults(lower_case=True, progress=True)
    return parser
