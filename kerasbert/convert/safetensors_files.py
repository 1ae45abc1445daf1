"""Reads safetensors files (Hugging Face's weight format) into NumPy arrays,
without torch and without the `safetensors` package.

The format: an 8-byte little-endian header length N, N bytes of JSON
({name: {"dtype", "shape", "data_offsets": [begin, end]}, optional
"__metadata__"}), then the tensors' bytes, little-endian, row-major, offsets
relative to the end of the header. A checkpoint too large for one file is
sharded: `model.safetensors.index.json` maps each name to its shard
("weight_map").

Bad files (truncated, a header that is not JSON, offsets outside the file, a
dtype this reader does not know) raise `CheckpointError` naming the file and
the tensor.
"""

import json
import os
import struct

import numpy as np

from kerasbert.errors import UsageError

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"

_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U8": np.uint8, "BOOL": np.bool_,
}
# Header JSON larger than this is not a weight file (the format caps it too).
_MAX_HEADER = 100 * 1024 * 1024


class CheckpointError(UsageError, ValueError):
    """An unreadable checkpoint file; the message names file and tensor."""


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


def read_safetensors(path):
    """{name: StoredTensor} of one safetensors file (bfloat16 reads as
    float32). The header is checked here, the data is read on use."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise CheckpointError(f"{path}: {size} bytes, too short for a safetensors file.")
        (length,) = struct.unpack("<Q", head)
        if length > min(_MAX_HEADER, size - 8):
            raise CheckpointError(f"{path}: header length {length} does not fit in the "
                                  f"file's {size} bytes (truncated, or not safetensors).")
        try:
            header = json.loads(f.read(length).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CheckpointError(f"{path}: the header is not JSON ({err}).") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: the header is not a JSON object.")
    data_size, start = size - 8 - length, 8 + length
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape = info["dtype"], [int(d) for d in info["shape"]]
            begin, end = (int(x) for x in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"{path}: tensor {name!r} has a malformed header entry "
                                  f"{info!r}.") from None
        if not 0 <= begin <= end <= data_size:
            raise CheckpointError(f"{path}: tensor {name!r} spans bytes {begin}..{end} but the "
                                  f"file holds {data_size} (truncated?).")
        if dtype != "BF16" and dtype not in _DTYPES:
            raise CheckpointError(f"{path}: tensor {name!r} has dtype {dtype}, which this "
                                  f"reader does not know.")
        width = 2 if dtype == "BF16" else np.dtype(_DTYPES[dtype]).itemsize
        if end - begin != width * int(np.prod(shape, dtype=np.int64)):
            raise CheckpointError(f"{path}: tensor {name!r} has {(end - begin) // width} values "
                                  f"for shape {shape}.")
        tensors[name] = StoredTensor(path, name, start + begin, end - begin, dtype, shape)
    return tensors


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
        with open(index, encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise CheckpointError(f"{index}: not a safetensors index ({err}).") from None
    tensors = {}
    for shard in sorted(set(weight_map.values())):
        path = os.path.join(directory, shard)
        if os.path.basename(shard) != shard or not os.path.isfile(path):
            raise CheckpointError(f"{index}: shard {shard!r} is missing from {directory}.")
        tensors.update(read_safetensors(path))
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
