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


def read_safetensors(path):
    """{name: np.ndarray} of one safetensors file (bfloat16 as float32)."""
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
        data = f.read()
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: the header is not a JSON object.")
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
        if not 0 <= begin <= end <= len(data):
            raise CheckpointError(f"{path}: tensor {name!r} spans bytes {begin}..{end} but the "
                                  f"file holds {len(data)} (truncated?).")
        raw = data[begin:end]
        if dtype == "BF16":
            values = _bfloat16_to_float32(raw)
        elif dtype in _DTYPES:
            values = np.frombuffer(raw, np.dtype(_DTYPES[dtype]).newbyteorder("<"))
        else:
            raise CheckpointError(f"{path}: tensor {name!r} has dtype {dtype}, which this "
                                  f"reader does not know.")
        if values.size != int(np.prod(shape, dtype=np.int64)):
            raise CheckpointError(f"{path}: tensor {name!r} has {values.size} values for "
                                  f"shape {shape}.")
        tensors[name] = values.reshape(shape)
    return tensors


def read_checkpoint_directory(directory):
    """{name: np.ndarray} of a Hugging Face model directory: its
    `model.safetensors`, or every shard its index names."""
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
