"""Small files that tests write and damage: vocabularies and TFRecords."""

import os
import struct

# A TFRecord record is: 8-byte little-endian length, 4-byte CRC of the
# length, the payload, 4-byte CRC of the payload.
_RECORD_OVERHEAD = 16


def write_vocabulary(path, tokens):
    """Writes one token per line (first occurrence kept, order preserved) to
    `path`, or to `path/vocab.txt` when `path` is a directory; returns the
    file's path."""
    if os.path.isdir(path):
        path = os.path.join(path, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(dict.fromkeys(tokens)) + "\n")
    return path


def tfrecord_offsets(data):
    """Byte offset of each record in the bytes of an uncompressed TFRecord
    file, so a test can damage record N precisely."""
    offsets, at = [], 0
    while at < len(data):
        offsets.append(at)
        at += _RECORD_OVERHEAD + struct.unpack("<Q", data[at:at + 8])[0]
    return offsets
