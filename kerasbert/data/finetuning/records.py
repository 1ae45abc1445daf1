"""Converted features <-> TFRecord files + metadata.json (create-finetuning-data).

Layout of an output folder:

    DIR/metadata.json                 task type, label names, max_seq_length,
                                      vocab sha256, per-split counts/stats/files
    DIR/<split>-00000-of-0000N.tfrecord

Every file is written under a temporary name and renamed when complete,
and metadata.json is replaced atomically after the shards, so a failure
never leaves a half-written split that looks complete. Reading back gives
the same `TaskFeatures` the conversion made, so training from files and
from raw text see identical batches.
"""

import os
import tempfile

import numpy as np

from kerasbert.data.finetuning import schema
from kerasbert.data.finetuning.examples import TaskDataError
from kerasbert.data.finetuning.features import TaskFeatures
from kerasbert.data.metadata import read_metadata, vocab_fingerprint, write_metadata

_COMPARED = ("task_type", "label_names", "max_seq_length", "num_choices", "vocab_sha256", "lower_case")


def _value(features, slot, key):
    holder = getattr(features, slot)
    return holder if key is None else holder[key]


def _num_choices(features):
    return int(features.x["input_word_ids"].shape[1]) if features.task_type == "multiple_choice" else None


def write_features(directory, split, features, vocab_file, lower_case=True, task=None,
                   num_shards=1, overwrite=False, options=None):
    """Writes one split of converted features as TFRecord shards.

    Splits written to the same folder must agree on task type, label names,
    max_seq_length and vocabulary. Returns the updated metadata dict.
    """
    import tensorflow as tf

    if not split or os.sep in split or split.startswith("."):
        raise TaskDataError(f"Bad split name {split!r}.")
    os.makedirs(directory, exist_ok=True)
    sha, vocab_size = vocab_fingerprint(vocab_file)
    meta = read_metadata(directory) or {}
    mine = {
        "task_type": features.task_type, "label_names": features.label_names,
        "max_seq_length": int(features.max_seq_length), "num_choices": _num_choices(features),
        "vocab_sha256": sha, "lower_case": bool(lower_case),
    }
    if meta:
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
    labelled = features.y is not None
    spec = schema.features_for(features.task_type, labelled)
    columns = {
        name: np.asarray(_value(features, slot, key)).reshape(len(features), -1)
        for name, (slot, key, _, _) in spec.items()
    }
    num_shards = max(1, min(int(num_shards), max(1, len(features))))
    names = [f"{split}-{i:05d}-of-{num_shards:05d}.tfrecord" for i in range(num_shards)]
    bounds = np.linspace(0, len(features), num_shards + 1).astype(int)
    temps = []
    try:
        for shard, name in enumerate(names):
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
            os.close(fd)
            temps.append(tmp)
            with tf.io.TFRecordWriter(tmp) as writer:
                for i in range(bounds[shard], bounds[shard + 1]):
                    feature = {}
                    for fname, (_, _, dtype, _) in spec.items():
                        row = columns[fname][i]
                        if dtype == "float32":
                            feature[fname] = tf.train.Feature(float_list=tf.train.FloatList(value=row.tolist()))
                        else:
                            feature[fname] = tf.train.Feature(int64_list=tf.train.Int64List(value=row.tolist()))
                    writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
        old = meta.get("splits", {}).get(split, {}).get("files", [])
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
    meta.update(mine)
    meta.update({"schema_version": schema.SCHEMA_VERSION, "vocab_size": vocab_size,
                 "created_by": "kerasbert create-finetuning-data"})
    if task is not None:
        meta["task"] = task
    meta.setdefault("splits", {})[split] = {
        "files": names, "num_features": len(features), "labelled": labelled,
        "features": schema.describe(features.task_type, labelled, features.max_seq_length,
                                    _num_choices(features)),
        "stats": {k: (int(v) if isinstance(v, (int, np.integer)) else v) for k, v in features.stats.items()},
        "options": options or {},
    }
    write_metadata(directory, meta)
    return meta


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


def features_dataset(directory, split):
    """A tf.data.Dataset of parsed records (file feature names) of one split."""
    import tensorflow as tf

    meta, info, files = _split_meta(directory, split)
    spec = schema.parsing_spec(meta["task_type"], info["labelled"], meta["max_seq_length"],
                               meta.get("num_choices"))
    return tf.data.TFRecordDataset(files).batch(1024).map(lambda r: tf.io.parse_example(r, spec)).unbatch()


def read_features(directory, split, vocab_file=None):
    """Reads one split back as `TaskFeatures` (same arrays and dtypes as the
    conversion made). With `vocab_file`, checks it is the vocabulary the
    files were made with."""
    meta, info, _ = _split_meta(directory, split)
    if vocab_file is not None and vocab_fingerprint(vocab_file)[0] != meta["vocab_sha256"]:
        raise TaskDataError(
            f"{directory} was made with another vocabulary than {vocab_file} (sha256 differs)."
        )
    task_type = meta["task_type"]
    spec = schema.features_for(task_type, info["labelled"])
    parts = {name: [] for name in spec}
    count = 0
    for batch in features_dataset(directory, split).batch(4096):
        for name in spec:
            parts[name].append(batch[name].numpy())
        count += len(batch["input_ids"])
    if count != info["num_features"]:
        raise TaskDataError(
            f"{directory} split {split!r}: {count} records, metadata says {info['num_features']}."
        )
    out = TaskFeatures(task_type, {}, None, None, {}, meta["label_names"], meta["max_seq_length"],
                       dict(info["stats"]))
    for name, (slot, key, dtype, shape_key) in spec.items():
        values = np.concatenate(parts[name]) if parts[name] else np.zeros(
            [0] + schema.shape_of(shape_key, task_type, meta["max_seq_length"], meta.get("num_choices")))
        values = values.astype(np.float32 if dtype == "float32" else np.int32)
        if shape_key == "one":
            values = values.reshape(-1)
        if task_type == "regression" and slot == "y":
            values = values.astype(np.float32)
        if key is None:
            setattr(out, slot, values)
        elif slot == "y":
            out.y = out.y or {}
            out.y[key] = values
        else:
            getattr(out, slot)[key] = values
    return out
