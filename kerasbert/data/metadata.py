"""`metadata.json`: the self-description written beside pretraining shards.

Fields (all written by the creator, checked by the readers):

    schema_version, features ({name: {dtype, shape}}), sequence_length,
    max_predictions_per_seq, objective ("nsp"|"sop"|"none"),
    masking ("static"|"dynamic"), whole_word_mask, tokenizer ("wordpiece"|
    "sentencepiece"|"bpe"; absent before BPE/SentencePiece data existed:
    WordPiece), vocab_sha256, vocab_size, lower_case, random_seed, options (every creation flag),
    shards ({file name: instance count}), num_instances, compression
    ("GZIP" or null), created_by.
"""

import hashlib
import json
import os

from kerasbert.io_utils import atomic_write_json
from kerasbert.text.families import WORDPIECE
from kerasbert.text.tokenizer_paths import read_vocabulary
from kerasbert.text.tokenizer_paths import resolve_tokenizer_path

METADATA_FILE = "metadata.json"


def vocab_fingerprint(vocab_path):
    """(sha256 hex, vocabulary size) of a tokenizer's files.

    vocab_path: anything `--vocab` takes (kerasbert.text.tokenizer_loading): a
        WordPiece vocab.txt (sha256 of the file, its number of lines), a
        SentencePiece `.model` (sha256 of the file, its pieces), or a BPE
        directory / vocab.json (sha256 of vocab.json then merges.txt, the
        vocabulary's tokens), or "bytes" (sha256 of its token list)."""
    kind, files = resolve_tokenizer_path(vocab_path)
    digest = hashlib.sha256()
    if not files:  # a vocabulary without files (bytes): its tokens
        digest.update("\n".join(read_vocabulary(vocab_path)[2]).encode("utf-8"))
    lines = 0
    for name in files:
        with open(name, "rb") as f:
            for line in f:
                digest.update(line)
                lines += 1
    size = lines if kind == WORDPIECE else len(read_vocabulary(vocab_path)[2])
    return digest.hexdigest(), size


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
