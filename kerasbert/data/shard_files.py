"""Pretraining shard files and what describes them: which files a pattern
names, their metadata.json (checked against what the caller asks for),
their compression, record counts and features, and whether they certainly
hold no record. `kerasbert.data.reader` reads the records themselves.

A shard folder's metadata.json (kerasbert.data.metadata) is optional: files
written by other tools are described by probing their first record.
"""

import glob as _glob
import os

import tensorflow as tf

from kerasbert.data import integrity, metadata, schema


def _folder_files(folder):
    """A shard folder's files: those metadata.json lists, else every file
    except metadata.json and hidden/temporary ones."""
    meta = metadata.read_metadata(folder)
    if meta is not None and meta.get("shards"):
        return [os.path.join(folder, name) for name in meta["shards"]]
    return [os.path.join(folder, name) for name in tf.io.gfile.listdir(folder)
            if name != metadata.METADATA_FILE and not name.startswith(".")
            and not tf.io.gfile.isdir(os.path.join(folder, name))]


def expand_files(file_pattern):
    """Sorted, de-duplicated files of a glob string, a shard folder, or a
    list of them."""
    single = isinstance(file_pattern, (str, os.PathLike))
    patterns = [file_pattern] if single else list(file_pattern)
    files = []
    for pattern in patterns:
        pattern = os.fspath(pattern)
        if _glob.has_magic(pattern):
            matches = tf.io.gfile.glob(pattern)
        elif tf.io.gfile.isdir(pattern):
            matches = _folder_files(pattern)
        else:
            matches = [pattern]
        matches = [m for m in matches if os.path.basename(m) != metadata.METADATA_FILE]
        if not matches and not _glob.has_magic(pattern) and tf.io.gfile.isdir(pattern):
            raise ValueError(f"No files match {pattern!r}: the folder holds no shard files.")
        if not matches:
            raise ValueError(f"No files match {pattern!r}.")
        for m in matches:
            if not tf.io.gfile.exists(m):
                raise ValueError(f"No such file: {m}")
            if "://" not in m and not os.access(m, os.R_OK):
                raise ValueError(f"{m} cannot be read (permission denied).")
        files.extend(matches)
    return sorted(set(files))


def folder_metadata(files):
    """{folder: metadata dict or None} for the folders holding `files`."""
    return {d: metadata.read_metadata(d) for d in sorted({os.path.dirname(f) for f in files})}


def describe_shards(files):
    """What identifies a set of shards wherever it lies: one dict per file
    (in `files` order) with its name relative to the files' common folder,
    its size in bytes and its record count from metadata.json (None when
    unknown). A run stores it, so a resume can tell whether it is given the
    same data (moved or not)."""
    files = list(files)
    folders = [os.path.dirname(os.path.abspath(f)) for f in files]
    common = os.path.commonpath(folders) if len(set(folders)) > 1 else folders[0]
    metas = folder_metadata(files)
    out = []
    for f in files:
        shards = (metas[os.path.dirname(f)] or {}).get("shards") or {}
        count = shards.get(os.path.basename(f))
        out.append({"file": os.path.relpath(os.path.abspath(f), common),
                    "bytes": int(tf.io.gfile.stat(f).length),
                    "records": None if count is None else int(count)})
    return out


def _certainly_empty(path, compression, count):
    """True when a file holds no record: metadata.json says 0, or its
    record stream is 0 bytes (an empty plain file; a small gzip file whose
    trailer says 0 bytes: a 4 GiB multiple cannot compress that far)."""
    if count == 0:
        return True
    expected, _ = integrity.expected_stream_bytes(path, compression)
    if expected != 0:
        return False
    return compression != "GZIP" or tf.io.gfile.stat(path).length < 2**20


def short_names(files, limit=3):
    """Up to `limit` file names, then how many more (for messages)."""
    shown = ", ".join(files[:limit])
    return shown + (f" and {len(files) - limit} more" if len(files) > limit else "")


def check_not_empty(files, compression_of=None, counts=None, record_shards=(1, 0)):
    """Raises EmptyDataError when `files` certainly hold no record (for
    input pipeline `record_shards[1]` of `record_shards[0]` sharing the
    files' records in chunks): reading them repeated would spin forever."""
    files = list(files)
    if compression_of is None or counts is None:
        metas = folder_metadata(files)
        compression_of = {f: file_compression(f, metas[os.path.dirname(f)]) for f in files}
        counts = {}
        for f in files:
            shards = (metas[os.path.dirname(f)] or {}).get("shards") or {}
            counts[f] = int(shards.get(os.path.basename(f), -1))
    if all(_certainly_empty(f, compression_of[f], counts[f]) for f in files):
        what = "the file" if len(files) == 1 else f"all {len(files)} files"
        raise integrity.EmptyDataError(
            f"no records to read: {what} {short_names(files)} hold none "
            "(0 records in metadata.json or 0 bytes of records).")
    num_shards, shard = record_shards
    if num_shards > 1 and all(counts[f] >= 0 for f in files):
        chunks = [-(-counts[f] // integrity.CHUNK_SIZE) for f in files]
        if all(c <= shard for c in chunks):
            raise integrity.EmptyDataError(
                f"no records for input pipeline {shard} of {num_shards}: {short_names(files)} "
                f"hold {sum(counts[f] for f in files)} records, shared in chunks of "
                f"{integrity.CHUNK_SIZE}, too few for every pipeline to get one; "
                "write more records (or more files) or use fewer workers.")


def file_compression(path, meta):
    """"GZIP" or None: metadata.json's compression, else by the ".gz" suffix."""
    if meta is not None and meta.get("compression"):
        return str(meta["compression"]).upper()
    return "GZIP" if path.endswith(".gz") else None


def _mismatch(what, yours, theirs, where):
    return ValueError(
        f"{what} mismatch: you asked for {yours}, but {where} says {theirs}."
    )


def _check_metadata(meta, folder, sequence_length, max_predictions_per_seq, vocab_file):
    where = os.path.join(folder, metadata.METADATA_FILE)
    version = meta.get("schema_version")
    if version is not None and version > schema.SCHEMA_VERSION:
        raise ValueError(f"{where} has schema_version {version}; this reader knows "
                         f"up to {schema.SCHEMA_VERSION}.")
    for key, value in (("max_seq_length", sequence_length),
                       ("max_predictions_per_seq", max_predictions_per_seq)):
        if value is not None and meta.get(key) is not None and int(value) != int(meta[key]):
            raise _mismatch(key, value, meta[key], where)
    if vocab_file is not None and meta.get("vocab_sha256"):
        sha, size = metadata.vocab_fingerprint(vocab_file)
        if meta.get("vocab_size") is not None and size != int(meta["vocab_size"]):
            raise _mismatch("vocab_size", f"{size} ({vocab_file})", meta["vocab_size"], where)
        if sha != meta["vocab_sha256"]:
            raise _mismatch("vocab_sha256", f"{sha} ({vocab_file})", meta["vocab_sha256"], where)


def _probe_features(files, compression_of):
    """Schema features present in the first readable record (for files
    without metadata.json); unreadable records are left to the checked
    reader to report."""
    from google.protobuf.message import DecodeError

    for path in files:
        ds = tf.data.TFRecordDataset(path, compression_type=compression_of[path] or "")
        try:
            record = next(iter(ds.take(1)), None)
            if record is None:
                continue
            example = tf.train.Example.FromString(record.numpy())
        except (tf.errors.DataLossError, DecodeError):
            continue
        names = [n for n in schema.FEATURES if n in example.features.feature]
        missing = [n for n in schema.SEQUENCE_FEATURES if n not in names]
        if missing:
            raise ValueError(f"{path} is not a pretraining file: it lacks {missing}.")
        return names
    raise ValueError(f"No readable record in {files[0]} ... to detect the features.")


def describe_files(files, sequence_length=None, max_predictions_per_seq=None,
                   vocab_file=None):
    """Validates the files against their metadata.json and returns
    (feature names, T, P, {path: compression}, {path: expected count})."""
    metas = folder_metadata(files)
    compression_of = {f: file_compression(f, metas[os.path.dirname(f)]) for f in files}
    counts = {}
    names = None
    for folder, meta in metas.items():
        if meta is None:
            continue
        _check_metadata(meta, folder, sequence_length, max_predictions_per_seq, vocab_file)
        sequence_length = sequence_length or meta.get("max_seq_length")
        max_predictions_per_seq = max_predictions_per_seq or meta.get("max_predictions_per_seq")
        folder_names = sorted(meta.get("features") or [])
        if names is not None and folder_names and folder_names != names:
            raise ValueError(f"{folder} holds features {folder_names}, other files {names}.")
        names = folder_names or names
        for name, count in (meta.get("shards") or {}).items():
            counts[os.path.join(folder, name)] = int(count)
    if sequence_length is None or max_predictions_per_seq is None:
        raise ValueError(
            "These files have no metadata.json; pass sequence_length and "
            "max_predictions_per_seq (the values they were written with)."
        )
    if names is None:
        names = _probe_features(files, compression_of)
    counts = {f: counts.get(f, -1) for f in files}
    return names, int(sequence_length), int(max_predictions_per_seq), compression_of, counts
