"""`kerasbert embed`: one sentence vector per input line.

    kerasbert embed --model all-MiniLM-L6-v2/ --input sentences.txt --output vectors.jsonl
    kerasbert embed --model all-MiniLM-L6-v2/ --input sentences.txt --output vectors.npy

--model is a sentence-transformers folder (its pooling, normalisation and
max_seq_length are used) or any model handle (`--pooling`, `--normalize`).
Every input line, blank ones too, gives one vector, so line i of the input
is row i of the output:

    *.npy      a float32 array [lines, dimension] (`numpy.load`)
    otherwise  JSON lines: one array of floats per line, each printed with 9
               significant digits (the float32 value exactly)

The output is written to a temporary file beside --output and renamed when
complete. TensorFlow is imported only when the command runs.
"""

import os

from kerasbert.commands._args import positive_int
from kerasbert.commands._args import add_embedding_arguments
from kerasbert.commands._args import add_tokenizer_switches
from kerasbert.commands._args import tokenizer_switches
from kerasbert.commands._args import check_pooling_flag
from kerasbert.errors import UsageError
from kerasbert.io_utils import atomic_file
from kerasbert.io_utils import check_output_kind
from kerasbert.text.text_files import check_utf8_text
from kerasbert.text.text_files import read_lines

NAME = "embed"
HELP = "Sentence vectors, one per input line (JSON lines, or .npy)."
DESCRIPTION = (
    "Each input line -> one sentence vector, with the pooling of a sentence-transformers "
    "folder (mean / CLS / max, normalisation, max_seq_length) or the one you choose. "
    "OUTPUT ending in .npy: a float32 array [lines, dimension]; otherwise JSON lines, one "
    "array of floats per line.")


def add_arguments(parser):
    parser.add_argument("--model", required=True, metavar="HANDLE",
                        help="A sentence-transformers folder, hf://OWNER/NAME, or any model "
                        "handle (a Hugging Face / keras-hub directory, a preset, ...).")
    parser.add_argument("--input", required=True,
                        help="UTF-8 text file, one text per line (a blank line is an empty text).")
    parser.add_argument("--output", required=True,
                        help="FILE.npy (float32 [lines, dimension]) or a JSON-lines file.")
    parser.add_argument("--max-seq-length", dest="sequence_length", type=positive_int, default=None,
                        metavar="L", help="Packed length, special tokens included; longer texts "
                        "are truncated (default: the folder's max_seq_length, else 128).")
    parser.add_argument("--batch-size", type=positive_int, default=32)
    add_embedding_arguments(parser)
    add_tokenizer_switches(parser)
    return parser


def count_lines(path):
    """Lines `read_lines` yields (a last line without a newline counts)."""
    return sum(1 for _ in read_lines(path))


def texts(path):
    """The input's lines without their line ends."""
    for line in read_lines(path):
        yield line.rstrip("\r\n")


def format_row(row):
    """A vector as one JSON array; '%.9g' gives every float32 back exactly."""
    return "[" + ",".join("%.9g" % value for value in row.tolist()) + "]\n"


def run(args):
    pooling = check_pooling_flag(args.pooling)
    if not os.path.isfile(args.input):
        raise UsageError(f"--input {args.input}: no such file.")
    if args.sequence_length is not None and args.sequence_length < 3:
        raise UsageError(f"--max-seq-length must be at least 3, got {args.sequence_length}.")
    check_output_kind(args.output, "file", "--output")  # before the run, not after it
    # Names the byte offset of a byte that is not UTF-8; blank lines are
    # texts too (one vector each), so a file of only blank lines is valid.
    check_utf8_text([args.input], require_text=False)
    import numpy as np

    # lazy: tensorflow (the model and its tokenizer)
    from kerasbert.tasks.sentence_encoder import default_sequence_length, load_sentence_encoder

    model, tokenizer = load_sentence_encoder(args.model, pooling, args.normalize, args.vocab,
                                             args.do_lower_case, **tokenizer_switches(args))
    sequence_length = args.sequence_length or model.sequence_length or default_sequence_length()
    chunks = model.embed(texts(args.input), tokenizer, sequence_length=sequence_length,
                         batch_size=args.batch_size)
    written = 0
    if args.output.endswith(".npy"):
        total = count_lines(args.input)
        with atomic_file(args.output, suffix=".npy") as tmp:
            array = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32,
                                              shape=(total, model.output_dim))
            for chunk in chunks:
                array[written:written + len(chunk)] = chunk
                written += len(chunk)
            array.flush()
            del array
    else:
        with atomic_file(args.output) as tmp, open(tmp, "w", encoding="utf-8") as out:
            for chunk in chunks:
                out.writelines(format_row(row) for row in chunk)
                written += len(chunk)
    print(f"Wrote {written} vector(s) of dimension {model.output_dim} "
          f"(pooling {'+'.join(model.pooling)}{', normalised' if model.normalize else ''}, "
          f"max_seq_length {sequence_length}) to {args.output}.")
