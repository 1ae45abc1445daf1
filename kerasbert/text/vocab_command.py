"""`kerasbert vocab`: build a WordPiece vocabulary from text files."""

import os

from kerasbert.errors import UsageError


def cmd_vocab(args):
    # Heavy imports here, so `kerasbert --help` does not load TensorFlow.
    from kerasbert.text import vocabulary

    missing = [f for f in args.input if not os.path.isfile(f)]
    if missing:
        raise UsageError(f"--input file(s) not found: {', '.join(missing)}")
    if args.vocab_size <= 0:
        raise UsageError(f"--vocab-size must be positive, got {args.vocab_size}.")
    try:
        tokens = vocabulary.build_wordpiece_vocab(
            args.input, args.vocab_size, lower_case=args.lower_case,
            show_progress=None if args.progress else False,
        )
    except ValueError as err:
        raise UsageError(str(err)) from None
    vocabulary.write_vocab(tokens, args.output)
    casing = "uncased" if args.lower_case else "cased"
    print(f"wrote {len(tokens)} tokens ({casing}) to {args.output}")


def register(subparsers):
    """Adds `vocab` to the `kerasbert` sub-command parsers."""
    parser = subparsers.add_parser(
        "vocab",
        help="Build a WordPiece vocabulary (vocab.txt) from text files.",
        description="Counts BERT-pretokenized words in UTF-8 text files and "
        "learns a WordPiece vocabulary starting with [PAD] [UNK] [CLS] [SEP] "
        "[MASK]. Every character seen (each CJK ideograph included) gets a "
        "token.",
    )
    parser.add_argument("--input", nargs="+", required=True, metavar="FILE",
                        help="UTF-8 text files (any line layout).")
    parser.add_argument("--vocab-size", type=int, required=True, metavar="N",
                        help="Maximum number of tokens, e.g. 30522.")
    parser.add_argument("--output", required=True, help="Where to write vocab.txt.")
    parser.add_argument("--no-lower-case", dest="lower_case", action="store_false",
                        help="Cased vocabulary (default: lower case, strip accents).")
    parser.add_argument("--no-progress", dest="progress", action="store_false",
                        help="No progress bar (default: shown for inputs over 8 MB).")
    parser.set_defaults(func=cmd_vocab, lower_case=True, progress=True)
    return parser
