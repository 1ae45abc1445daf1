"""Small files that tests write and damage: vocabularies, CSV, JSON-lines
and text inputs, TFRecords."""

import csv
import json
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


def write_csv(path, header, rows, delimiter=","):
    """Writes the `header` row, then `rows` (any iterable of sequences), as
    CSV (TSV with `delimiter="\\t"`); returns the path as a string."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)
    return str(path)


def write_jsonl(path, records):
    """One JSON object per line (UTF-8, not escaped); returns the path."""
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return str(path)


def write_text(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return str(path)


def tfrecord_offsets(data):
    """Byte offset of each record in the bytes of an uncompressed TFRecord
    file, so a test can damage record N precisely."""
    offsets, at = [], 0
    while at < len(data):
        offsets.append(at)
        at += _RECORD_OVERHEAD + struct.unpack("<Q", data[at:at + 8])[0]
    return offsets
