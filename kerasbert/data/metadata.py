"""`metadata.json`: the self-description written beside pretraining shards.

Fields (all written by the creator, checked by the readers):

    schema_version, features ({name: {dtype, shape}}), max_seq_length,
    max_predictions_per_seq, objective ("nsp"|"sop"|"none"),
    masking ("static"|"dynamic"), whole_word_mask, vocab_sha256,
    vocab_size, lower_case, random_seed, options (every creation flag),
    shards ({file name: instance count}), num_instances, compression
    ("GZIP" or null), created_by.
"""

import hashlib
import json
import os

from kerasbert.io_utils import atomic_write_json

METADATA_FILE = "metadata.json"


def vocab_fingerprint(vocab_file):
    """(sha256 hex, number of lines) of a vocabulary file."""
    digest = hashlib.sha256()
    lines = 0
    with open(vocab_file, "rb") as f:
        for line in f:
            digest.update(line)
            lines += 1
    return digest.hexdigest(), lines


def write_metadata(directory, metadata):
    atomic_write_json(os.path.join(directory, METADATA_FILE), metadata)


def read_metadata(directory):
    """The metadata dict of a shard folder, or None when there is none."""
    path = os.path.join(directory, METADATA_FILE)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON: {err}") from None
