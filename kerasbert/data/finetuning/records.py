"""Converted features <-> TFRecord files + metadata.json (create-finetuning-data).

Layout of an output folder:

    DIR/metadata.json                 task type, label names, sequence_length,
                                      vocab sha256, the tokenizer's settings,
                                      per-split counts/stats/files
    DIR/<split>-00000-of-0000N.tfrecord

Every file is written under a temporary name and renamed when complete,
and metadata.json is replaced atomically after the shards, so a failure
never leaves a half-written split that looks complete. Reading back gives
the same `TaskFeatures` the conversion made, so training from files and
from raw text see identical batches. Reading checks every file as the
pretraining reader does (`kerasbert.data.integrity`): a truncated or
corrupt file is a `TaskDataError` naming the file and the record, never a
TensorFlow traceback or silently fewer examples.
"""

import os
import tempfile

import numpy as np

from kerasbert.data.finetuning import schema
from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.data.finetuning.examples import TaskDataError
from kerasbert.data.finetuning.features import TaskFeatures
from kerasbert.data.metadata import read_metadata, vocab_fingerprint, write_metadata

_COMPARED = ("task_type", "label_names", "max_seq_length", "num_choices", "vocab_sha256", "lower_case",
             "tokenizer_settings")
# The command-line flag that sets a recorded tokenizer setting (named in errors).
_SETTING_FLAGS = {"lower_case": "--[no-]lower-case",
                  "special_tokens_in_strings": "--[no-]special-tokens-in-strings",
                  "truncate_at_nul": "--[no-]truncate-at-nul"}


def _value(features, slot, key):
    holder = getattr(features, slot)
    return holder if key is None else holder[key]


def _num_choices(features):
    if not task_format(features.task_type).per_choice:
        return None
    return int(features.x["input_word_ids"].shape[1])


def _shard_bounds(num_features, num_shards):
    """Record index where each of `num_shards` files starts, plus the end:
    int [num_shards + 1] (files get equal shares, in order)."""
    return np.linspace(0, num_features, num_shards + 1).astype(int)


def write_features(directory, split, features, vocab_file, lower_case=True, task=None,
                   num_shards=1, overwrite=False, options=None, tokenizer_settings=None):
    """Writes one split of converted features as TFRecord shards.

    Splits written to the same folder must agree on task type, label names,
    sequence_length, vocabulary and `tokenizer_settings` (the tokenizer's
    `kerasbert.text.ids_settings`: special_tokens_in_strings, max chars
    per word, truncate_at_nul, ..., recorded in metadata.json for
    `read_features` to check). Returns the updated metadata dict.
    """
    if not split or os.sep in split or split.startswith("."):
        raise TaskDataError(f"Bad split name {split!r}.")
    os.makedirs(directory, exist_ok=True)
    sha, vocab_size = vocab_fingerprint(vocab_file)
    meta = read_metadata(directory) or {}
    mine = {
        "task_type": features.task_type, "label_names": features.label_names,
        "max_seq_length": int(features.sequence_length), "num_choices": _num_choices(features),
        "vocab_sha256": sha, "lower_case": bool(lower_case),
        "tokenizer_settings": dict(tokenizer_settings) if tokenizer_settings else None,
    }
    _check_same_data(directory, split, meta, mine, overwrite)
    labelled = features.y is not None
    spec = schema.features_for(features.task_type, labelled)
    columns = _columns(features, spec, mine["num_choices"])
    num_shards = max(1, min(int(num_shards), max(1, len(features))))
    names = [f"{split}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]
    old = meta.get("splits", {}).get(split, {}).get("files", [])
    _write_shards(directory, names, _shard_bounds(len(features), num_shards), spec, columns, old)
    meta.update(mine)
    meta.update({"schema_version": schema.SCHEMA_VERSION, "vocab_size": vocab_size,
                 "created_by": "kerasbert create-finetuning-data"})
    if task is not None:
        meta["task"] = task
    meta.setdefault("splits", {})[split] = {
        "files": names, "num_features": len(features), "labelled": labelled,
        "features": schema.describe(features.task_type, labelled, features.sequence_length,
                                    _num_choices(features)),
        "stats": {k: (int(v) if isinstance(v, (int, np.integer)) else v) for k, v in features.stats.items()},
        "options": options or {},
    }
    write_metadata(directory, meta)
    return meta


def _check_same_data(directory, split, meta, mine, overwrite):
    """Refuses to add a split to a folder whose metadata.json (`meta`, {}
    when none) describes other data, or already has it (unless overwrite)."""
    if not meta:
        return
    if meta.get("schema_version") != schema.SCHEMA_VERSION or "splits" not in meta:
        raise TaskDataError(f"{directory} holds other data (metadata.json is not fine-tuning data).")
    for key in _COMPARED:
        if meta.get(key) != mine[key]:
            raise TaskDataError(
                f"{directory}: {key} {mine[key]!r} differs from the data already there "
                f"({meta.get(key)!r}); write to another folder."
            )
    if split in meta["splits"] and not overwrite:
        raise TaskDataError(f"{directory} already has split {split!r}; pass overwrite to replace it.")


def _columns(features, spec, num_choices):
    """{file feature name: [N, values per record]} for the features in
    `spec`, each checked against the width the schema stores."""
    columns = {
        name: np.asarray(_value(features, slot, key)).reshape(len(features), -1)
        for name, (slot, key, _, _) in spec.items()
    }
    for name, (_, _, _, shape_key) in spec.items():
        shape = schema.shape_of(shape_key, features.task_type, features.sequence_length,
                                num_choices)
        if len(features) and columns[name].shape[1] != int(np.prod(shape)):
            raise TaskDataError(
                f"{name}: {columns[name].shape[1]} values per record, but the schema stores "
                f"{shape} (a text2text target as long as its source, T each).")
    return columns


def _write_shards(directory, names, bounds, spec, columns, old):
    """Writes records bounds[k]..bounds[k + 1] of `columns` to file names[k]
    under a temporary name, renames them all when every one is complete,
    then removes the split's `old` files that are not rewritten."""
    import tensorflow as tf

    floats = {name for name, (_, _, dtype, _) in spec.items() if dtype == "float32"}
    temps = []
    try:
        for shard, name in enumerate(names):
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
            os.close(fd)
            temps.append(tmp)
            with tf.io.TFRecordWriter(tmp) as writer:
                for i in range(bounds[shard], bounds[shard + 1]):
                    writer.write(_example({fname: columns[fname][i].tolist() for fname in spec},
                                          floats))
        for tmp, name in zip(temps, names):
            os.replace(tmp, os.path.join(directory, name))
        temps = []
        for name in old:
            if name not in names and os.path.exists(os.path.join(directory, name)):
                os.remove(os.path.join(directory, name))
    finally:
        for tmp in temps:
            if os.path.exists(tmp):
                os.remove(tmp)


def _example(values, floats):
    """A serialized tf.train.Example of {name: list of numbers}: float
    lists for the names in `floats`, int64 lists for the others."""
    import tensorflow as tf

    feature = {}
    for name, row in values.items():
        if name in floats:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=row))
        else:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=row))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def has_split(directory, split):
    """Whether a create-finetuning-data folder lists `split` (a split it
    lists but cannot read is an error when read, never "no split")."""
    meta = read_metadata(directory)
    return bool(meta) and split in meta.get("splits", {})


def _split_meta(directory, split):
    meta = read_metadata(directory)
    if meta is None or "splits" not in meta:
        raise TaskDataError(f"{directory}: no fine-tuning data (no metadata.json with splits).")
    if split not in meta["splits"]:
        raise TaskDataError(f"{directory} has no split {split!r}; it has {', '.join(sorted(meta['splits']))}.")
    info = meta["splits"][split]
    files = [os.path.join(directory, name) for name in info["files"]]
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        raise TaskDataError(f"{directory}: split {split!r} lacks file(s) {', '.join(missing)}.")
    return meta, info, files


def _empty_record(spec):
    """A serialized Example that `spec` parses (zeros): the checked reader's
    padding record."""
    import tensorflow as tf

    floats = {name for name, fixed in spec.items() if fixed.dtype == tf.float32}
    return _example({name: [0.0 if name in floats else 0] * int(np.prod(fixed.shape))
                     for name, fixed in spec.items()}, floats)


def features_dataset(directory, split):
    """A tf.data.Dataset of parsed records (file feature names) of one split.

    Each file is read through `integrity.checked_records` (its size and its
    record count from metadata.json are checked, every record must parse):
    iterating raises a tf.errors.OpError that `integrity.from_op_error`
    turns into the file and record index (`read_features` does)."""
    import tensorflow as tf

    from kerasbert.data import integrity  # lazy: tensorflow

    meta, info, files = _split_meta(directory, split)
    spec = schema.parsing_spec(meta["task_type"], info["labelled"], meta["max_seq_length"],
                               meta.get("num_choices"))
    counts = np.diff(_shard_bounds(info["num_features"], len(files)))
    sentinel = _empty_record(spec)
    dataset = None
    for path, count in zip(files, counts):
        expected, modulus = integrity.expected_stream_bytes(path, None)
        records = integrity.checked_records(
            tf.constant(path), lambda r: tf.io.parse_single_example(r, spec), sentinel,
            expected_bytes=expected, modulus=modulus, expected_count=int(count),
            batch_parse_fn=lambda r: tf.io.parse_example(r, spec))
        dataset = records if dataset is None else dataset.concatenate(records)
    return dataset


def _read_batches(directory, split, batch_size):
    """Yields dicts of numpy arrays [<= batch_size, ...] of one split; a
    corrupt or truncated file is a TaskDataError naming file and record."""
    import tensorflow as tf

    from kerasbert.data import integrity  # lazy: tensorflow

    iterator = iter(features_dataset(directory, split).batch(batch_size))
    while True:
        try:
            batch = next(iterator)
        except StopIteration:
            return
        except tf.errors.OpError as err:
            found = integrity.from_op_error(err)
            if found is None:
                raise
            raise TaskDataError(
                f"{found.file} record {found.index}: {found.cause} (split {split!r} of "
                f"{directory}; write it again with create-finetuning-data)") from None
        yield {name: value.numpy() for name, value in batch.items()}


def read_features(directory, split, vocab_file=None, tokenizer_settings=None):
    """Reads one split back as `TaskFeatures` (same arrays and dtypes as the
    conversion made). With `vocab_file`, checks it is the vocabulary the
    files were made with; with `tokenizer_settings` (the reading run's
    `kerasbert.text.ids_settings`), that the features were made with the
    same settings (`check_tokenizer_settings`)."""
    meta, info, _ = _split_meta(directory, split)
    if vocab_file is not None and vocab_fingerprint(vocab_file)[0] != meta["vocab_sha256"]:
        raise TaskDataError(
            f"{directory} was made with another vocabulary than {vocab_file} (sha256 differs)."
        )
    if tokenizer_settings is not None:
        check_tokenizer_settings(meta, tokenizer_settings, directory)
    task_type = meta["task_type"]
    spec = schema.features_for(task_type, info["labelled"])
    parts = {name: [] for name in spec}
    count = 0
    for batch in _read_batches(directory, split, 4096):
        for name in spec:
            parts[name].append(batch[name])
        count += len(batch[next(iter(spec))])
    if count != info["num_features"]:
        raise TaskDataError(
            f"{directory} split {split!r}: {count} records, metadata says {info['num_features']}."
        )
    for name in schema.TOKEN_IDS:
        if name in parts:
            _check_token_ids(parts[name], meta, directory, split)
    out = TaskFeatures(task_type, {}, None, None, {}, meta["label_names"], meta["max_seq_length"],
                       dict(info["stats"]))
    for name, (slot, key, dtype, shape_key) in spec.items():
        values = np.concatenate(parts[name]) if parts[name] else np.zeros(
            [0] + schema.shape_of(shape_key, task_type, meta["max_seq_length"], meta.get("num_choices")))
        values = values.astype(np.float32 if dtype == "float32" else np.int32)
        if shape_key == "one":
            values = values.reshape(-1)
        if task_format(task_type).float_labels and slot == "y":
            values = values.astype(np.float32)
        if key is None:
            setattr(out, slot, values)
        elif slot == "y":
            out.y = out.y or {}
            out.y[key] = values
        else:
            getattr(out, slot)[key] = values
    return out


def check_tokenizer_settings(meta, settings, directory):
    """Raises `TaskDataError` (one line naming the setting, both values and
    the flag) where features were made by a tokenizer whose settings differ
    from `settings` (a run's `kerasbert.text.ids_settings`): the same text
    would get other ids. Features written before the settings were recorded
    are checked on their casing only."""
    recorded = dict(meta.get("tokenizer_settings") or {})
    recorded.setdefault("lower_case", meta.get("lower_case"))
    for key in sorted(set(recorded) | set(settings)):
        if key not in recorded or recorded[key] == settings.get(key):
            continue
        flag = _SETTING_FLAGS.get(key)
        how = (f"run create-finetuning-data again with {flag} as this run, or give this run "
               f"{flag} as the features" if flag else
               "run create-finetuning-data again with this run's tokenizer")
        raise TaskDataError(
            f"{directory} was made with a tokenizer whose {key} is {_short(recorded[key])}, but "
            f"this run's is {_short(settings.get(key))}: the same text would get other ids; "
            f"{how}.")


def _short(value, limit=80):
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _check_token_ids(batches, meta, directory, split):
    """Every token id lies in [0, vocab_size of metadata.json): on a GPU an
    out-of-range embedding lookup returns zeros instead of failing, so a
    damaged or hand-edited file would train on garbage without a word."""
    limit = meta.get("vocab_size")
    if limit is None:
        return
    start = 0
    for ids in batches:
        bad = (ids < 0) | (ids >= int(limit))
        if bad.any():
            row = int(np.argmax(bad.reshape(len(ids), -1).any(axis=1)))
            value = int(ids.reshape(len(ids), -1)[row][bad.reshape(len(ids), -1)[row]][0])
            raise TaskDataError(
                f"{directory} split {split!r} record {start + row}: token id {value} is outside "
                f"the vocabulary (vocab_size {int(limit)} in metadata.json)")
        start += len(ids)
