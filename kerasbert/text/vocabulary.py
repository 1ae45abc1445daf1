"""Reads and writes a WordPiece `vocab.txt` (one token per line, line
number = id). Learning one from text is `wordpiece_training`."""

import os

from kerasbert.io_utils import atomic_write_text


SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def load_vocab(path):
    """Reads a `vocab.txt` (one token per line) into a list of tokens.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file is empty, or a token appears twice (the id of a
            duplicated token would depend on the reader).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Vocabulary file not found: {path}")
    with open(path, encoding="utf-8") as f:
        tokens = [line.rstrip("\r\n") for line in f]
    # A trailing newline is normal; trailing blank lines are not tokens.
    while tokens and not tokens[-1].strip():
        tokens.pop()
    if not tokens:
        raise ValueError(f"Vocabulary file is empty: {path}")
    seen = {}
    duplicates = []
    for index, token in enumerate(tokens):
        if token in seen:
            duplicates.append(f"{token!r} (lines {seen[token] + 1} and {index + 1})")
        else:
            seen[token] = index
    if duplicates:
        shown = ", ".join(duplicates[:5])
        more = f" and {len(duplicates) - 5} more" if len(duplicates) > 5 else ""
        raise ValueError(f"Vocabulary file {path} has duplicate tokens: {shown}{more}")
    return tokens


def write_vocab(tokens, path):
    """Writes `tokens` one per line, atomically (temporary name, then rename).

    A failed or interrupted write never leaves a partial file under `path`.
    """
    path = os.fspath(path)
    tokens = list(tokens)
    bad = [t for t in tokens if not t or "\n" in t or "\r" in t]
    if bad:
        raise ValueError(f"Cannot write empty or multi-line tokens to {path}: {bad[:5]}")
    atomic_write_text(path, "\n".join(tokens) + "\n")
