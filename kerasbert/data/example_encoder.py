"""`ExampleEncoder`: pretraining instances serialized as tf.train.Example
bytes without protobuf (kerasbert.data.instances' last step)."""

import numpy as np

from kerasbert.data import schema
from kerasbert.data.instance_batches import Batch


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class _VarintTable:
    """Varint bytes of 0..size-1 as a [size, width] byte table plus lengths,
    so a whole id array is varint-encoded with two gathers and one compaction."""

    def __init__(self, size):
        self.size = size
        self.width = max(1, ((size - 1).bit_length() + 6) // 7)
        v = np.arange(size, dtype=np.int64)
        self.lengths = np.ones(size, dtype=np.int64)
        for j in range(1, self.width):
            self.lengths += v >= (1 << (7 * j))
        self.table = np.zeros((size, self.width), dtype=np.uint8)
        for j in range(self.width):
            self.table[:, j] = ((v >> (7 * j)) & 0x7F) | ((self.lengths > j + 1) << 7)

    def rows(self, values):
        """[N, K] ints in [0, size) -> (packed varints of all rows as bytes,
        row offsets [N + 1] as a list)."""
        if values.size and (int(values.max()) >= self.size or int(values.min()) < 0):
            raise ValueError(f"Id outside [0, {self.size}): cannot encode.")
        nbytes = self.lengths[values]
        keep = np.arange(self.width) < nbytes[..., None]
        packed = self.table[values].ravel().compress(keep.ravel()).tobytes()
        offsets = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(nbytes.sum(1), out=offsets[1:])
        return packed, offsets


class ExampleEncoder:
    """Serializes instances as `tf.train.Example` bytes, without protobuf.

    Building tf.train.Example messages costs more than making the instance;
    this writes the same wire format directly (packed varint Int64List,
    packed fixed32 FloatList, map entries in schema order), so the output
    parses with `tf.io.parse_example` and `tf.train.Example.FromString`.
    A whole Batch is encoded at once: varints by table lookups in numpy,
    feature headers from tables indexed by payload length, so per record
    only one bytes.join runs in Python. Feature names come from
    kerasbert.data.schema. Fixed lengths: sequence features
    [sequence_length], masked_lm_* [max_predictions_per_seq],
    next_sentence_labels [1]. input_ids are padded with `pad_id` (0 is
    BERT's [PAD]; RoBERTa's <pad> is 1), everything else with 0 (0.0 for
    weights).
    """

    def __init__(self, vocab_size, sequence_length, max_predictions_per_seq, objective, masked,
                 pad_id=0):
        self.pad_id = int(pad_id)
        self.names = schema.feature_names(objective, masked)
        self.sequence_length = T = sequence_length
        self.max_predictions = P = max_predictions_per_seq
        self._varints = _VarintTable(max(vocab_size, T, 2) + 1)
        self._small = [_varint(n) for n in range(1 << 14)]
        width = self._varints.width
        # Headers indexed by payload length, for every length possible.
        self._ids_header = [self._header("input_ids", b"\x1a", n) for n in range(T * width + 1)]
        self._mids_header = [self._header("masked_lm_ids", b"\x1a", n) for n in range(P * width + 1)]
        self._pos_header = [self._header("masked_lm_positions", b"\x1a", n)
                            for n in range(P * width + 1)]
        self._seg_header = self._header("segment_ids", b"\x1a", T)
        # Whole entries that depend only on a count.
        self._mask_entry = [
            self._entry("input_mask", b"\x1a", b"\x01" * n + b"\x00" * (T - n)) for n in range(T + 1)
        ]
        self._weights_entry = [
            self._entry("masked_lm_weights", b"\x12",
                        b"\x00\x00\x80\x3f" * k + b"\x00\x00\x00\x00" * (P - k))
            for k in range(P + 1)
        ]
        self._label_entry = [self._entry("next_sentence_labels", b"\x1a", bytes([v])) for v in (0, 1)]

    def _uvarint(self, n):
        return self._small[n] if n < len(self._small) else _varint(n)

    def _header(self, name, tag, n):
        """The bytes of a feature-map entry up to its payload of n bytes
        (tag b"\\x1a" Int64List, b"\\x12" FloatList; payload = packed values)."""
        v = self._uvarint
        values = b"\x0a" + v(n)  # The list's packed `value` field.
        feature = tag + v(len(values) + n) + values
        entry = b"\x0a" + v(len(name)) + name.encode() + b"\x12" + v(len(feature) + n) + feature
        return b"\x0a" + v(len(entry) + n) + entry

    def _entry(self, name, tag, payload):
        return self._header(name, tag, len(payload)) + payload

    def encode_batch(self, batch):
        """Batch -> list of serialized tf.train.Example bytes, in order."""
        T = self.sequence_length
        n = len(batch)
        if n and int(batch.lengths.max()) > T:
            raise ValueError(f"Instance of length {int(batch.lengths.max())} > sequence_length {T}.")
        if not n:
            return []
        columns, sizes = [], np.zeros(n, dtype=np.int64)

        def add(parts):
            columns.append(parts)

        def add_varints(values, headers):
            packed, offsets = self._varints.rows(values)
            lengths = np.diff(offsets)
            nonlocal sizes
            sizes = sizes + lengths + np.array([len(h) for h in headers])[lengths]
            offsets = offsets.tolist()
            add([headers[k] for k in lengths.tolist()])
            add([packed[a:b] for a, b in zip(offsets, offsets[1:])])

        def add_entries(table, index):
            nonlocal sizes
            sizes = sizes + np.array([len(e) for e in table])[index]
            add([table[k] for k in index.tolist()])

        add_varints(batch.tokens, self._ids_header)
        add_entries(self._mask_entry, batch.lengths)
        segments = batch.segments.astype(np.uint8).tobytes()  # 0/1: one byte each.
        add([self._seg_header] * n)
        add([segments[r * T:(r + 1) * T] for r in range(n)])
        sizes += len(self._seg_header) + T
        if "masked_lm_positions" in self.names:
            add_varints(batch.positions, self._pos_header)
            add_varints(batch.masked_ids, self._mids_header)
            add_entries(self._weights_entry, batch.counts)
        if "next_sentence_labels" in self.names:
            add_entries(self._label_entry, batch.labels)
        starts = [b"\x0a" + self._uvarint(k) for k in sizes.tolist()]
        return [b"".join(parts) for parts in zip(starts, *columns)]

    def encode(self, instance):
        """One `Instance` -> serialized tf.train.Example bytes."""
        T, P = self.sequence_length, self.max_predictions
        n = len(instance.tokens)
        if n > T:
            raise ValueError(f"Instance of length {n} > sequence_length {T}.")
        tokens = np.full((1, T), self.pad_id, dtype=np.int64)
        tokens[0, :n] = instance.tokens
        segments = np.zeros((1, T), dtype=np.uint8)
        segments[0, :n] = instance.segment_ids
        k = len(instance.masked_positions)
        positions = np.zeros((1, P), dtype=np.int64)
        masked_ids = np.zeros((1, P), dtype=np.int64)
        positions[0, :k] = instance.masked_positions
        masked_ids[0, :k] = instance.masked_ids
        label = np.array([0 if instance.label is None else int(instance.label)])
        batch = Batch(tokens, np.array([n]), segments, None, label, np.array([n]),
                      positions, masked_ids, np.array([k]))
        return self.encode_batch(batch)[0]
