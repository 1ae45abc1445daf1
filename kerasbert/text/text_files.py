"""Users' text files (corpora, task files) read as UTF-8, strictly.

A file that is not UTF-8 is refused, never decoded with replacement
characters (which would put U+FFFD "words" into a vocabulary or training
data): the error names the file, the byte offset and line of the first byte
that does not decode, so the user can find it (`head -c OFFSET`) or convert
the file (`iconv -f LATIN1 -t UTF-8`). A leading byte-order mark is dropped.

Plain Python, no TensorFlow: the CLI's main processes use it.
"""

import codecs

from kerasbert.errors import UsageError

ENCODING = "utf-8-sig"  # UTF-8; a leading BOM is not part of the text
_CHUNK = 1 << 20


def _scan(path):
    """One pass over `path` in 1 MiB chunks (bounded memory, linear time).

    Returns:
        (bad, has_text): bad is None or (byte offset, byte value, line
        number) of the first byte that is not UTF-8; has_text says whether
        any character before it is not whitespace.
    """
    offset, line, pending, has_text = 0, 1, b"", False
    with open(path, "rb") as f:
        while True:
            block = f.read(_CHUNK)
            data = pending + block
            try:
                # final=False keeps a sequence cut by the chunk end pending.
                text, used = codecs.utf_8_decode(data, "strict", not block)
            except UnicodeDecodeError as err:
                line += data.count(b"\n", 0, err.start)
                return (offset + err.start, data[err.start], line), has_text
            # Whitespace and a BOM are no text (the readers strip both).
            has_text = has_text or bool(text.replace("\ufeff", "").strip())
            if not block:
                return None, has_text
            line += data.count(b"\n", 0, used)
            offset, pending = offset + used, data[used:]


def not_utf8_error(path, bad):
    """The UsageError for a file whose first undecodable byte is `bad`
    (offset, value, line), as `_scan` finds it."""
    offset, value, line = bad
    return UsageError(
        f"{path}: not UTF-8 text: byte 0x{value:02x} at byte offset {offset} (line {line}) "
        f"does not decode; convert the file to UTF-8 (e.g. iconv -f LATIN1 -t UTF-8)."
    )


def check_utf8_text(paths, what="--input", require_text=True, nothing="no text"):
    """Refuses, before any work, input files that are not UTF-8, or that
    together hold no text (empty, or only blank lines and whitespace).

    Args:
        paths: the files (all must exist; the callers check that first, with
            their own messages).
        what: how the message names them (the command's flag).
        require_text: False when other inputs (e.g. tfds:) may hold the text.
        nothing: what the message says is missing ("no documents" for a
            corpus).

    Raises:
        UsageError: naming the file and byte offset, or "no text in ...".
    """
    any_text = False
    for path in paths:
        bad, has_text = _scan(path)
        if bad is not None:
            raise not_utf8_error(path, bad)
        any_text = any_text or has_text
    if require_text and not any_text:
        raise UsageError(f"{nothing} in {what} {', '.join(map(str, paths))}: the file(s) are "
                         "empty or hold only blank lines.")


def read_lines(path, newline=None):
    """Yields the lines of a UTF-8 text file (with their line ends).

    Args:
        path: the file.
        newline: as `open` (None: universal newlines; "" for the csv module).

    Raises:
        UsageError: at the first byte that is not UTF-8, naming the file and
            its byte offset (found by a second, binary pass: the text layer
            does not know file offsets).
    """
    with open(path, encoding=ENCODING, newline=newline) as f:
        try:
            yield from f
        except UnicodeDecodeError:
            raise _located(path) from None


def read_text(path):
    """The whole UTF-8 text of a (small) file, e.g. one JSON document;
    UsageError naming the byte offset as `read_lines`."""
    with open(path, encoding=ENCODING) as f:
        try:
            return f.read()
        except UnicodeDecodeError:
            raise _located(path) from None


def _located(path):
    bad, _ = _scan(path)
    if bad is None:  # The file changed between the two reads.
        return UsageError(f"{path}: not UTF-8 text.")
    return not_utf8_error(path, bad)


__all__ = ["ENCODING", "check_utf8_text", "not_utf8_error", "read_lines", "read_text"]
