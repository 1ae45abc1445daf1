"""Corrupt-shard detection for TFRecord readers: name the file and the record.

What TensorFlow 2.20 itself reports (measured here):

- CRC mismatch in a record's data or length:  DataLossError "corrupted record
  at <byte offset>"; no file name, no record index.
- last record cut short: DataLossError "truncated record at <byte offset>".
- a file cut inside the last record's 12-byte header: NO error at all, the
  reader stops early as if at end of file (silent data loss).
- garbage: DataLossError "corrupted record at 0 (Is this even a TFRecord
  file?)"; gzip: "inflate() failed ..." / "truncated record ... EOF reached".
- a valid record that is not an Example, or a feature of the wrong length:
  InvalidArgumentError from ParseExample ("Could not parse example input",
  "Number of int64 values != expected"), again without file or index.
- `ignore_errors()` after a TFRecordDataset ends that file at the first bad
  record, silently (DESIGN §6).

So the checked stream of one file works like this (`checked_records`):
`ignore_errors()` on the raw records (a framing error just ends the
stream), records grouped in chunks of 64, and their framed sizes summed
(len + 16 bytes each); a sentinel chunk after the last one compares the
bytes read with the file size (for gzip: with the uncompressed size in the
gzip trailer, mod 2^32) and the record count with metadata.json's count
when known. Each chunk is parsed in one vectorized `parse_example` call;
only if that fails are its records parsed one by one, so the bad one is
named (`concatenate` is lazy, so this slow path costs nothing otherwise).
Every mismatch becomes an error naming the file and the first lost record
index (a tf.errors.InvalidArgumentError whose message holds "CorruptRecordError:
file F, record index I: cause"; `from_op_error` turns it back into a
CorruptRecordError); nothing is dropped silently.

Values are range-checked too (`value_limits`): a token id outside the
vocabulary or a masked-LM position outside the sequence would be read
silently (on a GPU an out-of-range gather returns zeros), so such a record
is reported like a corrupt one, with the feature and the value.

A repeated dataset over files that hold no record at all would spin
forever; `EmptyDataError` (raised up front, or carried in an op error like
CorruptRecordError, see `data_error`) names the files instead.

`on_corrupt="skip"` logs each lost (file, index), counts them in a
`CorruptRecordLog`, and fails once more than `max_corrupt_records` are lost.
A framing error loses the rest of the file (TF cannot resynchronise); the
lost count is exact when metadata.json gives the file's record count, else
it counts as one.
"""

import dataclasses
import logging
import os
import re
import struct
import threading

import tensorflow as tf

logger = logging.getLogger(__name__)

RECORD_OVERHEAD = 16  # uint64 length + crc32 of length + crc32 of data
CHUNK_SIZE = 64  # records parsed (and shared between input pipelines) together
ERROR_MARKER = "CorruptRecordError"
EMPTY_MARKER = "EmptyDataError"

_BAD_EXAMPLE = 0
_BAD_FRAMING = 1
_BAD_COUNT = 2
_REASONS = {
    _BAD_EXAMPLE: "not a tf.train.Example with the expected features and shapes",
    _BAD_FRAMING: "corrupted or truncated TFRecord data (bytes read do not match "
    "the file size); this and later records of the file are unreadable",
    _BAD_COUNT: "file ends early: fewer records than metadata.json lists",
}


class CorruptRecordError(ValueError):
    """A record that cannot be read; names the file and record index.

    Example:

    >>> from kerasbert.data import CorruptRecordError
    >>> error = CorruptRecordError("data/part-0.tfrecord", 2, "truncated record")
    >>> str(error)
    'file data/part-0.tfrecord, record index 2: truncated record'
    >>> error.user_message()                                 # the CLI's one line
    'data/part-0.tfrecord record 2: truncated record'
    >>> (error.file, error.index), isinstance(error, ValueError)
    (('data/part-0.tfrecord', 2), True)
    """

    def __init__(self, file, index, cause):
        self.file, self.index, self.cause = file, int(index), cause
        # TF prefixes the class name when this crosses a py_function.
        super().__init__(f"file {file}, record index {index}: {cause}")

    def user_message(self):
        """One line for the command line: `FILE record N: cause`."""
        return f"{self.file} record {self.index}: {self.cause}"


class EmptyDataError(ValueError):
    """Files that hold no record to read (a repeated dataset would spin)."""

    def user_message(self):
        return str(self)


class CorruptRecordLog:
    """Thread-safe list of the (file, index, cause) records skipped."""

    def __init__(self, max_corrupt_records=0):
        self.max_corrupt_records = max_corrupt_records
        self.entries = []
        self._seen = set()
        self.failed = None  # the CorruptRecordError once past the threshold
        self._lock = threading.Lock()

    @property
    def count(self):
        return len(self.entries)

    def add(self, file, index, cause):
        with self._lock:
            if self.failed is not None:
                # A parallel reader may go on pulling after the failure;
                # its scan state is stale, so record nothing more.
                raise self.failed
            # A parallel reader may call a failed step again after an error;
            # count each record once.
            if (file, int(index)) in self._seen:
                return
            self._seen.add((file, int(index)))
            self.entries.append((file, int(index), cause))
            logger.warning("Skipping corrupt record: file %s, record index %d: %s",
                           file, index, cause)
            if (self.max_corrupt_records is not None
                    and len(self.entries) > self.max_corrupt_records):
                self.failed = CorruptRecordError(
                    file, index,
                    f"{cause}; {len(self.entries)} corrupt records skipped, more "
                    f"than max_corrupt_records={self.max_corrupt_records}",
                )
                raise self.failed


_MESSAGE = re.compile(
    ERROR_MARKER + r": file (?P<file>.+?), record index (?P<index>-?\d+): (?P<cause>[^\]\n]*)")


def from_op_error(error):
    """The CorruptRecordError described by a tf.errors.OpError raised while
    iterating a checked dataset, or None when it is some other error."""
    match = _MESSAGE.search(str(error))
    if match is None:
        return None
    return CorruptRecordError(match["file"], int(match["index"]), match["cause"].strip())


_EMPTY_MESSAGE = re.compile(EMPTY_MARKER + r": (?P<message>[^\]\n]*)")


def data_error(error):
    """The CorruptRecordError or EmptyDataError carried by a
    tf.errors.OpError raised while iterating a checked dataset (also
    through a tf.function or a py_function), or None for any other error."""
    found = from_op_error(error)
    if found is not None:
        return found
    match = _EMPTY_MESSAGE.search(str(error))
    return EmptyDataError(match["message"].strip()) if match else None


def empty_pass_check(dataset, marker, message):
    """`dataset` (one pass over the files; dict elements) repeated forever,
    failing with an EmptyDataError op error carrying `message` when a whole
    pass yields nothing, instead of spinning: each pass ends with `marker`
    (an element of the dataset's structure, dropped again), and a marker
    that follows another marker (or the start) means an empty pass. The
    check runs on groups of CHUNK_SIZE elements (one function call per
    group, not per record); the order of the elements is unchanged."""
    groups = dataset.batch(CHUNK_SIZE).map(lambda group: (tf.constant(False), group))
    marker = tf.nest.map_structure(lambda t: tf.expand_dims(t, 0), marker)
    tagged = groups.concatenate(tf.data.Dataset.from_tensors((tf.constant(True), marker)))
    text = f"{EMPTY_MARKER}: {message}"

    def check(seen, item):
        is_marker, group = item
        done = tf.debugging.Assert(tf.logical_or(tf.logical_not(is_marker), seen), [text])
        with tf.control_dependencies([done]):
            return tf.logical_not(is_marker), (tf.identity(is_marker), group)

    checked = tagged.repeat().scan(tf.constant(False), check)
    checked = checked.filter(lambda is_marker, group: tf.logical_not(is_marker))
    return checked.map(lambda is_marker, group: group).unbatch()


UNKNOWN_BYTES = -2


def expected_stream_bytes(path, compression):
    """(bytes the record stream should hold, modulus) for a file: the file
    size for plain files, the gzip trailer's ISIZE (mod 2^32) for gzip
    (exact for the single-member files TF writes; a concatenation of gzip
    files would need its own check), UNKNOWN_BYTES for other codecs
    (ZLIB: no size check, metadata counts still apply); -1 = too short."""
    if compression and compression != "GZIP":
        return UNKNOWN_BYTES, 0
    if compression == "GZIP":
        with tf.io.gfile.GFile(path, "rb") as f:
            data_len = f.size()
            if data_len < 18:  # smaller than an empty gzip member
                return -1, 2**32
            f.seek(data_len - 4)
            return struct.unpack("<I", f.read(4))[0], 2**32
    return tf.io.gfile.stat(path).length, 0


def _report_fn(log):
    """A py_function body: logs `count` lost records from `start`."""

    def report(file, start, count, reason):
        file = file.numpy().decode("utf-8", "replace")
        start, count, reason = int(start), int(count), int(reason)
        cause = _REASONS[reason]
        if count < 0:  # framing error, number of records lost unknown
            log.add(file, start, cause + " (number of records lost unknown)")
        for index in range(start, start + max(count, 0)):
            log.add(file, index, cause)
        return 0

    return report


def _problem(bad, file, index, count, reason, log):
    """Raises (log None) or reports (skip mode) when `bad` is true."""
    if log is None:
        message = tf.strings.join([
            f"{ERROR_MARKER}: file ", file, ", record index ",
            tf.strings.as_string(index), f": {_REASONS[reason]}",
        ])
        return tf.debugging.Assert(tf.logical_not(bad), [message])
    return tf.cond(
        bad,
        lambda: tf.py_function(_report_fn(log), [file, index, count, reason], tf.int64),
        lambda: tf.constant(0, tf.int64),
    )


def _parse_chunk(records, first_index, parse_fn, batch_parse_fn, sentinel, path, log,
                 value_limits=()):
    """Parses a chunk [n] of consecutive records of `path` into a batched
    dict [n, ...] in one vectorized call. Only when that fails (some record
    is bad) are the records parsed one by one to name the bad ones; the
    good ones come out as one batch [m, ...]. Then `value_limits` are
    checked (see `_check_values`)."""
    fast = tf.data.Dataset.from_tensors(records).map(
        lambda r: (tf.range(tf.size(r, out_type=tf.int64)), batch_parse_fn(r))).ignore_errors()
    n = tf.size(records, out_type=tf.int64)
    slow = tf.data.Dataset.from_tensor_slices(records).enumerate()
    slow = slow.map(lambda i, r: (i, parse_fn(r))).ignore_errors()
    slow = slow.concatenate(tf.data.Dataset.from_tensors((n, parse_fn(sentinel))))

    def check(next_index, element):
        index, features = element
        # Records next_index .. index-1 did not parse.
        gap = index - next_index
        done = _problem(gap > 0, path, first_index + next_index, gap, _BAD_EXAMPLE, log)
        with tf.control_dependencies([done]):
            return index + 1, (tf.identity(index), features)

    slow = slow.scan(tf.constant(0, tf.int64), check)
    slow = slow.filter(lambda i, _: i < n)
    slow = slow.batch(tf.cast(tf.maximum(n, 1), tf.int64))
    # concatenate is lazy: `slow` only runs when `fast` dropped its element.
    parsed = fast.concatenate(slow).take(1)
    if value_limits:
        return parsed.map(lambda indices, features: _check_values(
            indices, features, first_index, path, log, value_limits))
    return parsed.map(lambda indices, features: features)


def _check_values(indices, features, first_index, path, log, value_limits):
    """Range check of a parsed chunk: every value of feature NAME must lie
    in [0, LIMIT) for each (NAME, LIMIT, SOURCE) of `value_limits` (LIMIT an
    int64 scalar, < 0: only negatives are refused; SOURCE says where the
    limit comes from). A record that breaks it is reported like a corrupt
    one (naming the feature and the value) and, in skip mode, dropped."""
    columns, limits, sources, names = [], [], [], []
    for name, limit, source in value_limits:
        values = features[name]
        width = values.shape[-1]
        columns.append(tf.reshape(values, [-1, width]))
        limits.append(tf.fill([width], tf.cast(limit, tf.int64)))
        sources.append(tf.fill([width], tf.convert_to_tensor(source, tf.string)))
        names += [name] * width
    values = tf.cast(tf.concat(columns, axis=1), tf.int64)  # [m, C]
    limits, sources = tf.concat(limits, 0), tf.concat(sources, 0)
    bad = (values < 0) | ((limits >= 0)[tf.newaxis] & (values >= limits[tf.newaxis]))
    record_bad = tf.reduce_any(bad, axis=1)
    # The first offending column of each bad record, and its value.
    bad_rows = tf.boolean_mask(bad, record_bad)
    column = tf.argmax(tf.cast(bad_rows, tf.int32), axis=1, output_type=tf.int32)
    value = tf.gather(tf.boolean_mask(values, record_bad), column, batch_dims=1)
    limit = tf.gather(limits, column)
    bounds = tf.where(limit >= 0,
                      tf.strings.join([", outside [0, ", tf.strings.as_string(limit), ") (",
                                       tf.gather(sources, column), ")"]),
                      tf.constant(", a negative id"))
    causes = tf.strings.join([tf.gather(tf.constant(names), column), " holds ",
                              tf.strings.as_string(value), bounds])
    bad_index = first_index + tf.boolean_mask(indices, record_bad)
    if log is None:
        first = tf.concat([causes, [""]], 0)[0]
        message = tf.strings.join([
            f"{ERROR_MARKER}: file ", path, ", record index ",
            tf.strings.as_string(tf.concat([bad_index, [-1]], 0)[0]), ": ", first])
        done = tf.debugging.Assert(tf.logical_not(tf.reduce_any(record_bad)), [message])
        with tf.control_dependencies([done]):
            return tf.nest.map_structure(tf.identity, features)

    def report(file, index, cause):
        file = file.numpy().decode("utf-8", "replace")
        for i, c in zip(index.numpy().tolist(), cause.numpy().tolist()):
            log.add(file, i, c.decode("utf-8", "replace"))
        return 0

    done = tf.cond(tf.reduce_any(record_bad),
                   lambda: tf.py_function(report, [path, bad_index, causes], tf.int64),
                   lambda: tf.constant(0, tf.int64))
    with tf.control_dependencies([done]):
        keep = tf.logical_not(record_bad)
        return tf.nest.map_structure(lambda t: tf.boolean_mask(t, keep), features)


READ_BUFFER_BYTES = 256 * 1024  # tf.data.TFRecordDataset's default


def record_stream(path, compression=None):
    """The raw records of ONE file: the TFRecordDataset op itself, without
    the `flat_map` over file names that `tf.data.TFRecordDataset` wraps it
    in. That flat_map saves its current element, the file's path, in a
    checkpointed iterator, and a restore reopens that saved path (failing
    once the data moved, or from another working directory). Here the path
    is an input of the op, so a restored iterator reads the path of the
    pipeline it is restored into."""
    variant = tf.raw_ops.TFRecordDataset(
        filenames=tf.convert_to_tensor(path, tf.string),
        compression_type=compression or "",
        buffer_size=tf.constant(READ_BUFFER_BYTES, tf.int64))
    return tf.data.experimental.from_variant(variant, tf.TensorSpec([], tf.string))


def _open_probe(path):
    """An empty dataset of strings that opens `path` and reads its first
    byte (raw, not decompressed), failing when the file cannot be read."""
    variant = tf.raw_ops.FixedLengthRecordDatasetV2(
        filenames=tf.convert_to_tensor(path, tf.string), header_bytes=tf.constant(0, tf.int64),
        record_bytes=tf.constant(1, tf.int64), footer_bytes=tf.constant(0, tf.int64),
        buffer_size=tf.constant(1, tf.int64), compression_type="")
    probe = tf.data.experimental.from_variant(variant, tf.TensorSpec([], tf.string))
    return probe.take(1).filter(lambda byte: tf.constant(False))


def checked_records(path, parse_fn, sentinel, *, compression=None,
                    expected_bytes=None, modulus=0, expected_count=-1, log=None,
                    chunk_size=CHUNK_SIZE, batch_parse_fn=None, chunk_shards=(1, 0),
                    value_limits=()):
    """The records of one file, parsed, with corruption turned into errors.

    Args:
        path: scalar string tensor, the file.
        parse_fn: serialized record (scalar string) -> dict of tensors.
        sentinel: a serialized record parse_fn accepts (pads the checks).
        compression: None/"" or "GZIP".
        expected_bytes: int64 scalar, see `expected_stream_bytes`.
        modulus: 0 or 2**32 (gzip sizes).
        expected_count: records metadata.json lists for the file, -1 unknown.
        log: None raises on the first problem; a CorruptRecordLog skips.
        chunk_size: records parsed per vectorized call.
        batch_parse_fn: records [n] -> dict of [n, ...]; default maps
            parse_fn over them.
        chunk_shards: (num_shards, shard): keep only chunk k with
            k % num_shards == shard (record sharding between pipelines;
            every pipeline still checks the whole file's framing).
        value_limits: [(feature name, limit, source)]: every value of the
            feature must lie in [0, limit) (limit an int64 scalar; < 0:
            only negatives are refused); `source` (a string) names where
            the limit comes from in the error, e.g. "vocab_size in
            metadata.json".

    Returns:
        Dataset of parsed dicts (one record each), in file order.
    """
    if batch_parse_fn is None:
        batch_parse_fn = lambda records: tf.map_fn(  # noqa: E731
            parse_fn, records, fn_output_signature=tf.nest.map_structure(
                tf.TensorSpec.from_tensor, parse_fn(tf.constant(sentinel))))
    # A framing error just ends the stream here (the byte count below sees
    # it), but a file that cannot be opened would make ignore_errors() retry
    # the open forever: a one-byte probe, not ignored, opens it first and
    # fails with the OS's error (NotFound, PermissionDenied) instead.
    raw = _open_probe(path).concatenate(record_stream(path, compression).ignore_errors())
    raw = raw.batch(chunk_size).enumerate()
    raw = raw.concatenate(tf.data.Dataset.from_tensors(
        (tf.constant(-1, tf.int64), tf.constant([], tf.string))))
    expected_bytes = tf.cast(expected_bytes, tf.int64)
    expected_count = tf.cast(expected_count, tf.int64)

    def count(state, element):
        records_before, total = state
        chunk, records = element
        n = tf.size(records, out_type=tf.int64)
        total = total + tf.reduce_sum(tf.cast(tf.strings.length(records), tf.int64))
        total = total + RECORD_OVERHEAD * n
        end = chunk < 0
        seen = total if not modulus else tf.math.floormod(total, modulus)
        known = expected_bytes != UNKNOWN_BYTES
        framing_bad = end & known & ((expected_bytes < 0) | (seen != expected_bytes))
        lost = tf.where(expected_count >= 0, expected_count - records_before, -1)
        deps = [_problem(framing_bad, path, records_before, lost, _BAD_FRAMING, log)]
        count_bad = (end & ~framing_bad & (expected_count >= 0)
                     & (records_before < expected_count))
        deps.append(_problem(count_bad, path, records_before,
                             expected_count - records_before, _BAD_COUNT, log))
        with tf.control_dependencies(deps):
            out = (tf.identity(chunk), records, records_before)
        return (records_before + n, total), out

    raw = raw.scan((tf.constant(0, tf.int64), tf.constant(0, tf.int64)), count)
    num_shards, shard = chunk_shards
    raw = raw.filter(lambda chunk, r, first: (chunk >= 0) & (chunk % num_shards == shard))
    parsed = raw.flat_map(lambda chunk, records, first: _parse_chunk(
        records, first, parse_fn, batch_parse_fn, sentinel, path, log, value_limits))
    return parsed.unbatch()


@dataclasses.dataclass
class ShardReport:
    """verify_shards result for one file."""

    file: str
    records: int  # records that read and parsed
    corrupt: list  # [(index, cause)] lost records, first first

    @property
    def first_corrupt_index(self):
        return self.corrupt[0][0] if self.corrupt else None

    @property
    def ok(self):
        return not self.corrupt


def empty_example():
    return tf.train.Example().SerializeToString()


def _example_only_parsers():
    """Parsers that only check "is a tf.train.Example" (no schema known);
    an int64 input_ids, when present, must parse too."""
    spec = {"input_ids": tf.io.VarLenFeature(tf.int64)}

    def one(record):
        values = tf.io.parse_single_example(record, spec)["input_ids"].values
        return {"num_input_ids": tf.size(values, out_type=tf.int64)}

    def many(records):
        sparse = tf.io.parse_example(records, spec)["input_ids"]
        counts = tf.math.unsorted_segment_sum(
            tf.ones_like(sparse.values), sparse.indices[:, 0], tf.size(records))
        return {"num_input_ids": counts}

    return one, many


def verify_file(path, parse_fn=None, sentinel=None, compression=None,
                expected_count=-1, batch_parse_fn=None, value_limits=()):
    """Scans one file; returns a ShardReport (never raises for corruption)."""
    if parse_fn is None:
        parse_fn, batch_parse_fn = _example_only_parsers()
        sentinel = empty_example()
    log = CorruptRecordLog(max_corrupt_records=None)
    expected, modulus = expected_stream_bytes(path, compression)
    ds = checked_records(
        tf.constant(path), parse_fn, sentinel, compression=compression,
        expected_bytes=expected, modulus=modulus, expected_count=expected_count,
        log=log, batch_parse_fn=batch_parse_fn, value_limits=value_limits,
    )
    records = int(ds.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1))
    corrupt = sorted((index, cause) for _, index, cause in log.entries)
    return ShardReport(file=os.fspath(path), records=records, corrupt=corrupt)
