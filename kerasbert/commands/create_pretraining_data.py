"""`kerasbert create-pretraining-data`: the CLI over kerasbert.data.writer.

`add_arguments` is shared with `tfrecords/create_pretraining_data.py`, so
both take exactly the same flags. TensorFlow is imported only when the
command runs, so `kerasbert --help` stays instant.
"""

import argparse
import contextlib

from kerasbert.commands._args import positive_int
from kerasbert.errors import UsageError
from kerasbert.io_utils import output_lock


NAME = "create-pretraining-data"
HELP = "Write masked-LM + sentence-label pretraining TFRecords."
DESCRIPTION = (
    "Text -> pretraining TFRecords (google-research/bert layout) "
    "+ metadata.json. Streaming, parallel, deterministic, atomic.")


def add_arguments(parser):
    """Adds every create-pretraining-data flag to an argparse parser."""
    parser.add_argument(
        "--input", nargs="+", default=[], metavar="INPUT",
        help="Text files or glob patterns (one sentence per line with blank lines between "
        "documents, or plain paragraphs: blank-line separated, possibly "
        "hard-wrapped, or one per line) and/or tfds:NAME[:SPLIT]. Files must be "
        "UTF-8: one with a byte that does not decode is refused (exit 2, naming the "
        "file and the byte offset), never read with replacement characters; inputs "
        "with no documents are refused too, and nothing is written. A Beam --runner "
        "also reads gs://, s3:// and hdfs:// paths.",
    )
    parser.add_argument(
        "--tfds", action="append", default=[], metavar="NAME[:CONFIG]/SPLIT",
        help="A TFDS text dataset as input (repeatable), e.g. wikipedia:20230601.en/train; "
        "its text feature is --tfds-text-key.")
    parser.add_argument("--tfds-text-key", dest="text_field", help=argparse.SUPPRESS)
    parser.add_argument(
        "--vocab", required=True,
        help="Tokenizer files: a WordPiece vocab.txt (BERT), a SentencePiece .model "
        "(ALBERT), or a directory with vocab.json + merges.txt (byte-level BPE, RoBERTa; "
        "--objective none). A Beam --runner also reads it from gs://, s3:// and hdfs://.")
    parser.add_argument("--output-dir", required=True,
                        help="Folder for shards + metadata.json (a Beam --runner also writes "
                        "to gs://, s3:// and hdfs://).")
    parser.add_argument("--max-seq-length", dest="sequence_length", type=positive_int, default=128)
    parser.add_argument("--max-predictions-per-seq", type=positive_int, default=20)
    parser.add_argument("--masked-lm-prob", type=float, default=0.15)
    parser.add_argument("--dupe-factor", type=positive_int, default=10,
                        help="Times each document is used, with different masks.")
    parser.add_argument("--short-seq-prob", type=float, default=0.1)
    parser.add_argument("--random-seed", type=int, default=12345)
    parser.add_argument("--do-lower-case", action=argparse.BooleanOptionalAction,
                        default=True, help="Lower-case and strip accents (default).")
    parser.add_argument("--no-lower-case", dest="do_lower_case", action="store_false",
                        help=argparse.SUPPRESS)
    parser.add_argument("--whole-word-mask", action="store_true",
                        help="Mask all wordpieces of a word together.")
    parser.add_argument("--objective", choices=("nsp", "sop", "none"), default="nsp",
                        help="nsp: BERT next sentence; sop: ALBERT sentence order; "
                        "none: RoBERTa FULL-SENTENCES, no sentence label.")
    parser.add_argument("--no-masking", action="store_true",
                        help="Store unmasked sequences (mask dynamically when reading).")
    parser.add_argument("--num-shards", type=positive_int, default=1)
    parser.add_argument("--workers", type=positive_int, default=1, help="Worker processes.")
    parser.add_argument("--gzip", action="store_true", help="GZIP-compressed shards (.gz).")
    parser.add_argument("--text-field", help="Text field of a TFDS input (e.g. text); "
                        "also spelled --tfds-text-key.")
    parser.add_argument("--input-format", choices=("auto", "sentences", "paragraphs"),
                        default="auto",
                        help="Text file layout; auto detects plain paragraphs.")
    parser.add_argument(
        "--runner", choices=("local", "direct", "portable", "flink", "spark", "dataflow"),
        default="local",
        help="local (default): this machine, --workers processes. "
        "direct|portable|flink|spark|dataflow: an Apache Beam pipeline running the same code "
        "(the same records); the runner's own options follow a lone --, e.g. "
        "`-- --project=P --region=R --temp_location=gs://B/tmp`. With direct, --workers sets "
        "the worker processes. The workers of portable, flink, spark and dataflow start bare: "
        "the pipeline stages a wheel of this kerasbert (--extra_package) and carries the "
        "tokenizer's files by value (README: Pretraining data at corpus scale).")
    parser.add_argument("pipeline_args", nargs="*", metavar="-- PIPELINE_OPTION",
                        help="Options of the Beam runner, after --.")
    parser.add_argument("--overwrite", action="store_true",
                        help="Replace existing shards in --output-dir.")
    parser.add_argument("--no-progress", action="store_true", help="No progress bar.")
    return parser


def tfds_input(value):
    """--tfds NAME[:CONFIG]/SPLIT -> the writer's tfds:NAME[/CONFIG]:SPLIT."""
    name, slash, split = value.rpartition("/")
    if not slash or not name or not split:
        raise UsageError(f"--tfds {value!r}: expected NAME[:CONFIG]/SPLIT, e.g. "
                         "wikipedia:20230601.en/train.")
    return f"tfds:{name.replace(':', '/', 1)}:{split}"


def run(args):
    """Runs the writer from parsed args; prints a one-line summary."""
    from kerasbert.data.writer import create_pretraining_data  # lazy: numpy

    args.input = list(args.input) + [tfds_input(v) for v in args.tfds]
    if not args.input:
        raise UsageError("give --input (text files) and/or --tfds (a TFDS dataset).")
    remote = "://" in args.output_dir
    lock = contextlib.nullcontext() if remote else output_lock(
        args.output_dir, kind="folder", flag="--output-dir")
    with lock:
        meta = _create(create_pretraining_data, args)
    print(
        f"Wrote {meta['num_instances']} instances from {meta['num_documents']} "
        f"documents to {len(meta['shards'])} shard(s) in {args.output_dir}"
    )


def _create(create_pretraining_data, args):
    return create_pretraining_data(
        args.input, args.vocab, args.output_dir,
        sequence_length=args.sequence_length,
        max_predictions_per_seq=args.max_predictions_per_seq,
        masked_lm_prob=args.masked_lm_prob, dupe_factor=args.dupe_factor,
        short_seq_prob=args.short_seq_prob, random_seed=args.random_seed,
        lower_case=args.do_lower_case, whole_word_mask=args.whole_word_mask,
        objective=args.objective, masking=not args.no_masking,
        num_shards=args.num_shards, workers=args.workers, gzip=args.gzip,
        text_field=args.text_field, input_format=args.input_format,
        overwrite=args.overwrite, progress=not args.no_progress,
        runner=args.runner, pipeline_args=args.pipeline_args,
    )
