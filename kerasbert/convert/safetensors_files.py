"""Reads safetensors files (Hugging Face's weight format) into NumPy arrays,
without torch and without the `safetensors` package.

The format: an 8-byte little-endian header length N, N bytes of JSON
({name: {"dtype", "shape", "data_offsets": [begin, end]}, optional
"__metadata__"}), then the tensors' bytes, little-endian, row-major, offsets
relative to the end of the header. A checkpoint too large for one file is
sharded: `model.safetensors.index.json` maps each name to its shard
("weight_map").

The file comes from a stranger, so the header is checked as the format
requires before any tensor is read: JSON of bounded size and depth
(`kerasbert.sources.source.parse_json`), each entry a known dtype, a shape
of non-negative integers and a [begin, end] pair whose length is exactly
dtype width x element count, and the entries, sorted by offset, tiling the
data section: the first at 0, each beginning where the previous ends (no
overlap: two names can never share bytes; no gap), the last at the end of
the file. Anything else (truncated, not JSON, offsets outside the file or
over another tensor, a dtype this reader does not know) raises
`CheckpointError` naming the file and the tensor.
"""

import json
import math
import os
import struct

import numpy as np

from kerasbert.errors import CheckpointError
from kerasbert.sources.source import MAX_JSON_BYTES
from kerasbert.sources.source import parse_json
from kerasbert.sources.source import read_json_file

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"

_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U8": np.uint8, "BOOL": np.bool_,
}
# Header JSON larger than this is not the weights of a model of ours (the
# format itself caps it at 100 MB; a BERT-large header is about 40 kB).
_MAX_HEADER = MAX_JSON_BYTES


def _bfloat16_to_float32(raw):
    """bfloat16 is the top half of a float32: widen the bits."""
    bits = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
    return bits.view(np.float32)


class StoredTensor(np.lib.mixins.NDArrayOperatorsMixin):
    """One tensor of a safetensors file, read from disk when it is used
    (`np.asarray(t)`, arithmetic, slicing), so a loader holds one tensor
    at a time instead of the whole file. `.T` stays lazy (torch Linear
    weights are transposed on the way in)."""

    def __init__(self, path, name, offset, nbytes, dtype, shape, transposed=False):
        self.path, self.name, self.offset, self.nbytes = path, name, offset, nbytes
        self.code, self.stored_shape, self.transposed = dtype, tuple(shape), transposed

    @property
    def shape(self):
        return self.stored_shape[::-1] if self.transposed else self.stored_shape

    @property
    def ndim(self):
        return len(self.stored_shape)

    @property
    def dtype(self):
        return np.dtype(np.float32 if self.code == "BF16" else _DTYPES[self.code])

    @property
    def size(self):
        return int(np.prod(self.stored_shape, dtype=np.int64))

    @property
    def T(self):
        return StoredTensor(self.path, self.name, self.offset, self.nbytes, self.code,
                            self.stored_shape, not self.transposed)

    def read(self):
        # Read straight into the array (no intermediate bytes object).
        stored = np.dtype("<u2") if self.code == "BF16" else self.dtype.newbyteorder("<")
        values = np.empty(self.nbytes // stored.itemsize, stored)
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            got = f.readinto(memoryview(values).cast("B"))
        if got != self.nbytes:
            raise CheckpointError(f"{self.path}: tensor {self.name!r} ends past the end of the "
                                  "file (truncated while loading?).")
        if self.code == "BF16":
            values = _bfloat16_to_float32(values)
        elif values.dtype != self.dtype:
            values = values.astype(self.dtype)  # big-endian hosts only
        values = values.reshape(self.stored_shape)
        return values.T if self.transposed else values

    def rows(self, start, stop):
        """Rows start..stop of a stored (not transposed) tensor, read alone."""
        if self.transposed:
            raise ValueError("rows() reads stored rows; this view is transposed.")
        row_bytes = self.nbytes // self.stored_shape[0]
        part = StoredTensor(self.path, self.name, self.offset + start * row_bytes,
                            (stop - start) * row_bytes, self.code,
                            (stop - start,) + self.stored_shape[1:])
        return part.read()

    def __array__(self, dtype=None, copy=None):
        values = self.read()
        return values if dtype is None else values.astype(dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = [np.asarray(x) if isinstance(x, StoredTensor) else x for x in inputs]
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __getitem__(self, index):
        return self.read()[index]

    def __len__(self):
        return self.shape[0]

    def reshape(self, *shape):
        return self.read().reshape(*shape)

    def astype(self, dtype):
        return self.read().astype(dtype)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _entry(path, name, info):
    """(dtype, shape, begin, end) of one header entry, checked for type."""
    if not isinstance(info, dict):
        raise CheckpointError(f"{path}: tensor {name!r} has a malformed header entry {info!r}.")
    dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
    if dtype != "BF16" and dtype not in _DTYPES:
        raise CheckpointError(f"{path}: tensor {name!r} has dtype {dtype!r}, which this "
                              "reader does not know.")
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise CheckpointError(f"{path}: tensor {name!r} has shape {shape!r}; a shape is a "
                              "list of integers >= 0.")
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(_is_int(x) for x in offsets) or not 0 <= offsets[0] <= offsets[1]):
        raise CheckpointError(f"{path}: tensor {name!r} has data_offsets {offsets!r}; they are "
                              "[begin, end] with 0 <= begin <= end.")
    return dtype, shape, offsets[0], offsets[1]


def read_header(path):
    """(header entries {name: (dtype, shape, begin, end)}, where the data
    starts) of one safetensors file, checked as the module docstring says."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise CheckpointError(f"{path}: {size} bytes, too short for a safetensors file.")
        (length,) = struct.unpack("<Q", head)
        if length > size - 8:
            raise CheckpointError(f"{path}: header length {length} does not fit in the "
                                  f"file's {size} bytes (truncated, or not safetensors).")
        if length > _MAX_HEADER:
            raise CheckpointError(f"{path}: a header of {length:,} bytes; this reader takes "
                                  f"at most {_MAX_HEADER:,}.")
        raw = f.read(length)
    header = parse_json(raw, f"{path} (safetensors header)")
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: the header is not a JSON object.")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not (isinstance(metadata, dict) and all(
            isinstance(v, str) for v in metadata.values())):
        raise CheckpointError(f"{path}: \"__metadata__\" is not an object of strings.")
    data_size = size - 8 - length
    entries = {}
    for name, info in header.items():
        dtype, shape, begin, end = _entry(path, name, info)
        if end > data_size:
            raise CheckpointError(f"{path}: tensor {name!r} spans bytes {begin}..{end} but the "
                                  f"file holds {data_size} (truncated?).")
        width = 2 if dtype == "BF16" else np.dtype(_DTYPES[dtype]).itemsize
        count = math.prod(shape)  # Python integers: no overflow
        if end - begin != width * count:
            raise CheckpointError(f"{path}: tensor {name!r} has {end - begin} bytes; shape "
                                  f"{shape} of {dtype} needs {width * count}.")
        entries[name] = (dtype, shape, begin, end)
    _check_tiling(path, entries, data_size)
    return entries, 8 + length


def _check_tiling(path, entries, data_size):
    """The tensors' byte ranges, sorted, cover the data section exactly:
    an overlap anywhere is named first (two names reading the same bytes
    is the hostile case), then a gap, then bytes past the last tensor."""
    position, previous, gap = 0, None, None
    for begin, end, name in sorted((e[2], e[3], n) for n, e in entries.items()):
        if begin < position:
            raise CheckpointError(f"{path}: tensor {name!r} (bytes {begin}..{end}) overlaps "
                                  f"tensor {previous!r} (bytes ..{position}); no two tensors "
                                  "may share bytes.")
        if begin > position and gap is None:
            gap = (position, begin, name)
        position, previous = end, name
    if gap is not None:
        raise CheckpointError(f"{path}: bytes {gap[0]}..{gap[1]} of the data, before tensor "
                              f"{gap[2]!r}, belong to no tensor.")
    if position != data_size:
        raise CheckpointError(f"{path}: the tensors end at byte {position} of the data but "
                              f"the file holds {data_size}; bytes {position}..{data_size} "
                              "belong to no tensor.")


def read_safetensors(path):
    """{name: StoredTensor} of one safetensors file (bfloat16 reads as
    float32). The header is checked here (`read_header`), the data is read
    on use."""
    entries, start = read_header(path)
    return {name: StoredTensor(path, name, start + begin, end - begin, dtype, shape)
            for name, (dtype, shape, begin, end) in entries.items()}


def read_checkpoint_directory(directory):
    """{name: StoredTensor} of a Hugging Face model directory: its
    `model.safetensors`, or every shard its index names (read on use)."""
    single = os.path.join(directory, SINGLE_FILE)
    index = os.path.join(directory, INDEX_FILE)
    if os.path.isfile(single):
        return read_safetensors(single)
    if not os.path.isfile(index):
        raise CheckpointError(f"{directory}: no {SINGLE_FILE} and no {INDEX_FILE} (only "
                              "safetensors weights are read; convert .bin files first).")
    try:
        weight_map = read_json_file(index)
    except OSError as err:
        raise CheckpointError(f"{index}: not readable ({err.strerror}).") from None
    weight_map = weight_map.get("weight_map") if isinstance(weight_map, dict) else None
    if not isinstance(weight_map, dict) or not all(
            isinstance(shard, str) for shard in weight_map.values()):
        raise CheckpointError(f"{index}: not a safetensors index (no \"weight_map\" object of "
                              "tensor name -> shard file).")
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        path = os.path.join(directory, shard)
        if os.path.basename(shard) != shard or shard in ("", ".", "..") or not os.path.isfile(path):
            raise CheckpointError(f"{index}: shard {shard!r} is missing from {directory}.")
        stored = read_safetensors(path)
        twice = sorted(set(stored) & set(tensors))
        if twice:
            raise CheckpointError(f"{index}: tensor {twice[0]!r} is stored in two shards "
                                  f"({tensors[twice[0]].path} and {path}).")
        tensors.update(stored)
    missing = sorted(set(weight_map) - set(tensors))
    if missing:
        raise CheckpointError(f"{index}: {len(missing)} tensor(s) named in the index are in no "
                              f"shard, e.g. {missing[0]!r}.")
    return tensors


_WRITE_DTYPES = {np.dtype(v).str: k for k, v in _DTYPES.items()}


def write_safetensors(path, tensors):
    """Writes {name: array} as one safetensors file (little-endian,
    row-major, names sorted), the format `read_safetensors` and the
    `safetensors` library read. The caller writes under a temporary name."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        array = array.astype(array.dtype.newbyteorder("<"), copy=False)
        dtype = _WRITE_DTYPES.get(array.dtype.str)
        if dtype is None:
            raise ValueError(f"{name}: dtype {array.dtype} has no safetensors code here.")
        blob = array.tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
