"""`kerasbert create-finetuning-data`: a task's examples -> TFRecords of model features.

`add_arguments` is shared with `tfrecords/create_finetuning_data.py`, so
both take exactly the same flags; the task/column flags come from
`kerasbert.commands._args` (shared with `finetune`/`evaluate`).
TensorFlow is imported only when the command runs.

Every split is loaded and converted before anything is written, so a bad
validation file cannot leave a folder with a fresh train split and a stale
(or missing) validation split; each split is then written atomically by
`write_features` (temp files renamed, metadata.json replaced last).
"""

import os

from kerasbert.commands._args import positive_int
from kerasbert.commands._args import add_task_arguments
from kerasbert.commands._args import add_tokenizer_arguments
from kerasbert.commands._args import tokenizer_switches
from kerasbert.commands._args import columns_from_args
from kerasbert.commands._args import comma_list
from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.errors import UsageError
from kerasbert.io_utils import output_lock

# Splits whose name starts with one of these may have no labels (GLUE test
# splits, prediction files): they are written without label features.
NAME = "create-finetuning-data"
HELP = "Write a fine-tuning task's model features as TFRecords."
DESCRIPTION = (
    "Task examples (TFDS or local files) -> TFRecords of model features "
    "+ metadata.json, once, for large sets and TPU runs (`finetune --features DIR`).")


UNLABELLED_PREFIXES = ("test", "predict")


def add_arguments(parser):
    """Adds every create-finetuning-data flag to an argparse parser."""
    add_task_arguments(parser)
    add_tokenizer_arguments(parser)
    parser.add_argument("--max-seq-length", dest="sequence_length", type=positive_int, default=None,
                        help=f"Sequence length T (default {task_format('classification').sequence_length}; "
                        f"{task_format('qa').sequence_length} for qa).")
    parser.add_argument("--doc-stride", type=positive_int, default=128,
                        help="qa: context windows start this many pieces apart.")
    parser.add_argument("--max-query-length", type=positive_int, default=64,
                        help="qa: questions are cut to this many pieces.")
    parser.add_argument("--on-bad-answer", choices=("error", "skip"), default="error",
                        help="qa: an answer not found at its answer_start: fail (default) "
                        "or skip the example (counted).")
    parser.add_argument(
        "--splits", type=comma_list, default=["train"], metavar="NAME[=SPEC],...",
        help="Splits to write (default train), e.g. train,validation. A TFDS task "
        "reads each split by name; a local file is ONE split, so give the others "
        "their own file: --splits train,validation=dev.csv (SPEC: a path or a task "
        "spec). Splits named test*/predict* may be unlabelled.",
    )
    parser.add_argument("--output-dir", required=True, help="Folder for shards + metadata.json.")
    parser.add_argument("--num-shards", type=positive_int, default=1, help="Shards per split.")
    parser.add_argument("--overwrite", action="store_true",
                        help="Replace splits that already exist in --output-dir.")
    return parser


def parse_splits(items, task):
    """["train", "validation=dev.csv"] -> [(name, spec)], train first.

    A local-file task names one file, so only one split may use it.
    """
    from kerasbert.data.finetuning.load import FILE_PREFIXES, parse_task_spec  # lazy: tensorflow

    kind, _ = parse_task_spec(task)  # Unknown task: a clear error first.
    out, seen = [], set()
    for item in items:
        name, sep, spec = item.partition("=")
        name, spec = name.strip(), spec.strip()
        if not name or (sep and not spec):
            raise UsageError(f"--splits: bad item {item!r}; expected NAME or NAME=SPEC.")
        if name in seen:
            raise UsageError(f"--splits: split {name!r} is listed twice.")
        seen.add(name)
        if spec:
            try:
                spec_kind, target = parse_task_spec(spec)
                if spec_kind in FILE_PREFIXES:  # A bare "dev.csv" -> "csv:dev.csv".
                    spec = f"{spec_kind}:{target}"
            except UsageError:
                if kind in FILE_PREFIXES:  # "dev.txt" with --task tsv:train.tsv -> tsv:dev.txt.
                    spec = f"{kind}:{spec}"
                else:
                    raise
        out.append((name, spec or task))
    if kind in FILE_PREFIXES:
        users = [name for name, spec in out if spec == task]
        if len(users) > 1:
            raise UsageError(
                f"Task {task!r} is one local file, so it is one split, but --splits gives it to "
                f"{', '.join(users)}; give the other splits their own files, e.g. "
                f"--splits {users[0]},{users[1]}=PATH."
            )
    out.sort(key=lambda pair: pair[0] != "train")  # Train first: its label names lead.
    return out


def _num_choices(features):
    x = next(iter(features.x.values()))  # input_word_ids (text2text: encoder_token_ids)
    return int(x.shape[1]) if x.ndim == 3 else None


def _check_consistent(converted, meta):
    """Fails before writing when the splits disagree with each other or with
    the data already in the folder (write_features checks each split too)."""
    def described(features):
        return {"task_type": features.task_type, "label_names": features.label_names,
                "num_choices": _num_choices(features), "max_seq_length": int(features.sequence_length)}

    first_name, _, first = converted[0]
    want = described(first)
    for name, _, features in converted[1:]:
        for key, value in described(features).items():
            if value != want[key]:
                raise UsageError(
                    f"Split {name!r} has {key} {value!r}, split {first_name!r} has "
                    f"{want[key]!r}; the splits of one folder must agree."
                )
    for key, value in want.items():
        if meta and key in meta and meta[key] != value:
            raise UsageError(
                f"{key} {value!r} differs from the data already in the folder "
                f"({meta[key]!r}); write to another --output-dir."
            )


def run(args):
    """Loads, converts and writes every split (holding the lock on
    --output-dir); prints one line per split."""
    with output_lock(args.output_dir, kind="folder", flag="--output-dir"):
        _write_splits(args)


def _write_splits(args):
    # lazy: tensorflow
    from kerasbert.data.finetuning.convert import convert_examples
    from kerasbert.data.finetuning.load import load_task
    from kerasbert.data.finetuning.records import write_features
    from kerasbert.data.metadata import read_metadata

    if not os.path.exists(args.vocab):
        raise UsageError(f"Vocabulary not found: {args.vocab}")
    if args.num_shards < 1:
        raise UsageError(f"--num-shards must be at least 1, got {args.num_shards}.")
    if args.sequence_length is not None and args.sequence_length < 3:
        raise UsageError(f"--max-seq-length must be at least 3, got {args.sequence_length}.")
    splits = parse_splits(args.splits, args.task)
    try:
        meta = read_metadata(args.output_dir) if os.path.isdir(args.output_dir) else None
    except ValueError as err:
        raise UsageError(str(err)) from None
    if meta is not None and "splits" not in meta:
        raise UsageError(f"{args.output_dir} holds other data (metadata.json is not fine-tuning data).")
    if meta and not args.overwrite:
        present = [name for name, _ in splits if name in meta["splits"]]
        if present:
            raise UsageError(
                f"{args.output_dir} already has split(s) {', '.join(present)}; pass --overwrite "
                "to replace them."
            )

    from kerasbert.text import ids_settings, load_tokenizer, tokenizer_files  # lazy: tensorflow

    tokenizer = load_tokenizer(args.vocab, lower_case=args.do_lower_case,
                               **tokenizer_switches(args))
    # Features record the sha256 of the vocabulary file (vocab.json for BPE).
    vocab_file = tokenizer_files(tokenizer)[0]
    columns = columns_from_args(args) or None
    # Later splits take the first (train) split's label names, so ids agree;
    # a folder that already holds splits sets them for everything new.
    label_names = (meta or {}).get("label_names")
    converted = []
    for name, spec in splits:
        labelled = not name.startswith(UNLABELLED_PREFIXES)
        data = load_task(spec, name, task_type=args.task_type, columns=columns,
                         label_names=label_names, require_labels=labelled)
        if label_names is None and data.label_names is not None:
            label_names = list(data.label_names)
        # The converter options the task type takes (QA's windowing).
        flags = {"doc_stride": args.doc_stride, "max_query_length": args.max_query_length,
                 "is_training": bool(data.has_labels), "on_bad_answer": args.on_bad_answer}
        options = {k: v for k, v in flags.items() if k in task_format(data.task_type).options}
        features = convert_examples(data, tokenizer, args.sequence_length, **options)
        record = {"task": spec, "split": name, "task_type": data.task_type,
                  "columns": columns or {}, **options}
        converted.append((name, record, features))

    _check_consistent(converted, meta)
    for name, record, features in converted:
        write_features(args.output_dir, name, features, vocab_file, lower_case=tokenizer.lower_case,
                       task=args.task, num_shards=args.num_shards, overwrite=args.overwrite,
                       options=record, tokenizer_settings=ids_settings(tokenizer))
        stats = ", ".join(f"{k} {v}" for k, v in sorted(features.stats.items())
                          if k not in ("num_examples", "num_features"))
        shards = min(args.num_shards, max(1, len(features)))
        print(
            f"{name}: {features.stats.get('num_examples', len(features))} examples -> "
            f"{len(features)} features ({features.task_type}, T={features.sequence_length}) in "
            f"{shards} shard(s)" + (f"; {stats}" if stats else "")
        )
    print(f"Wrote {len(converted)} split(s) to {args.output_dir} (metadata.json)")
