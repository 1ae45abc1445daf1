"""TensorFlow string ops every tokenizer family shares: the plain-ASCII
shortcut (`by_rows`), Unicode lower case as the `tokenizers` library does
it, the NUL-character work-arounds (`cut_at_nul`, a NUL-safe
`regex_split_with_offsets`) and the offset bookkeeping (`row_ids`,
`byte_to_char`).

Each stays within a few graph nodes where it can: a tf.data iterator
optimizes its map function's graph anew, at about half a millisecond a
node, so a tokenizer's node count is part of its throughput.
"""

import tensorflow as tf


#: A text of printable ASCII, tab, newline and carriage return only: what
#: every normalization of the zoo leaves alone but for ASCII lower-casing
#: (no control or format character, no space separator, no capital sigma,
#: nothing NFD changes, no combining mark).
PLAIN_ASCII = r"[\t\n\r\x20-\x7e]*"


def by_rows(texts, plain, other):
    """`texts` with its plain-ASCII rows (`PLAIN_ASCII`) through `plain` and
    the others through `other`, in their order: the cheap path for most
    text of most corpora, the full one where it changes something. Both
    functions map string [M] -> string [M].

    Args:
        texts: string tensor, any shape.

    Returns:
        string tensor, same shape.
    """
    flat = tf.reshape(texts, [-1])
    is_plain = tf.cast(tf.strings.regex_full_match(flat, PLAIN_ASCII), tf.int32)
    other_rows, plain_rows = tf.dynamic_partition(flat, is_plain, 2)
    positions = tf.dynamic_partition(tf.range(tf.size(flat)), is_plain, 2)
    out = tf.dynamic_stitch(positions, [other(other_rows), plain(plain_rows)])
    return tf.reshape(out, tf.shape(texts))


def lower_case(texts, nul_free=False):
    """Unicode lower case, character by character, as the `tokenizers`
    library (Rust's `char::to_lowercase`) does it.

    `tf.strings.lower` (ICU) would turn a word-final "Σ" into "ς" (the one
    context rule of the root locale), and lower-casing one character at a
    time (the offset mapping) into "σ": "Σ" becomes "σ" first so that both
    agree. It also stops at a NUL character (a C-string bug): a batch
    holding one is lower-cased between its NULs. Plain-ASCII texts
    (`PLAIN_ASCII`, most of most corpora) skip both steps.

    Args:
        texts: string [N].
        nul_free: the texts hold no NUL (BERT's normalization removed it):
            no NUL check.

    Returns:
        string [N].
    """
    return by_rows(texts, tf.strings.lower, lambda rows: lower_case_unicode(rows, nul_free))


def lower_case_unicode(texts, nul_free=False):
    """`lower_case` without the plain-ASCII shortcut (for texts known to
    need the full path)."""
    texts = tf.strings.regex_replace(texts, "\u03a3", "\u03c3")
    if nul_free:
        return tf.strings.lower(texts, encoding="utf-8")

    def between_nuls():
        # Separators given as op attributes are C strings too: the NULs go
        # back as tensor values. The op's own outputs, no ragged tensor (few
        # graph nodes: a tf.data iterator optimizes them anew).
        indices, parts, _ = tf.raw_ops.StringSplitV2(input=texts, sep=tf.constant("\x00"))
        rows = indices[:, 0]
        last = tf.not_equal(rows, tf.concat([rows[1:], [-1]], 0))
        parts = tf.strings.join([tf.strings.lower(parts, encoding="utf-8"),
                                 tf.where(last, "", tf.constant("\x00"))])
        return tf.strings.unsorted_segment_join(parts, rows, tf.size(texts, out_type=tf.int64))

    nul = tf.reduce_any(tf.strings.regex_full_match(texts, "(?s).*\\x00.*"))
    return tf.cond(nul, between_nuls, lambda: tf.strings.lower(texts, encoding="utf-8"))


def cut_at_nul(texts):
    """Each text up to its first NUL character (string [N] -> [N]).

    The pattern spells NUL as an escape: an op attribute is a C string."""
    return tf.strings.regex_replace(texts, r"(?s)\x00.*", "")


def row_ids(splits):
    """Row splits [R + 1] -> the row of each value [splits[-1]] (int64),
    in four graph nodes (`RaggedTensor.value_rowids` takes some seventy)."""
    values = tf.range(splits[-1])
    # tf.searchsorted's own reshaping is most of its graph: the op itself.
    return tf.raw_ops.UpperBound(sorted_inputs=splits[None], values=values[None],
                                 out_type=tf.int64)[0] - 1


def byte_to_char(texts, rows, positions):
    """UTF-8 byte positions (at character boundaries) -> code point
    positions.

    Args:
        texts: string [N].
        rows: int64 [K], the text of each position.
        positions: int64 [K], byte offsets into those texts.

    Returns:
        int64 [K].
    """
    _, char_starts = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")
    text_base = tf.cumsum(tf.cast(tf.strings.length(texts, unit="BYTE"), tf.int64), exclusive=True)
    starts = char_starts.flat_values + tf.gather(text_base, char_starts.value_rowids())
    found = tf.searchsorted(starts, tf.gather(text_base, rows) + positions, side="left",
                            out_type=tf.int64)
    return found - tf.gather(char_starts.row_starts(), rows)


def regex_split_op(texts, delim_pattern, keep_pattern):
    """tensorflow-text's RegexSplitWithOffsets op, its ragged results built
    unchecked (tensorflow-text's wrapper checks the op's row splits with
    some hundred graph nodes, which every tf.data iterator optimizes anew).
    Reads each text up to its first NUL, as the op does
    (`regex_split_with_offsets` reads past it).

    Args:
        texts: string [N].
        delim_pattern, keep_pattern: RE2 patterns, as the wrapper takes them.

    Returns:
        (pieces, start bytes, end bytes), `tf.RaggedTensor`s [N, (pieces)].
    """
    from tensorflow_text.python.ops.regex_split_ops import gen_regex_split_ops

    pieces, starts, ends, splits = gen_regex_split_ops.regex_split_with_offsets(
        texts, f"({delim_pattern})", f"({keep_pattern})")
    return tuple(tf.RaggedTensor.from_row_splits(values, splits, validate=False)
                 for values in (pieces, starts, ends))


def regex_split_with_offsets(texts, delim_pattern, keep_pattern, check=True):
    """`tensorflow_text.regex_split_with_offsets`, also for texts holding
    NUL characters: the op stops reading a text at its first NUL (a C-string
    bug), so a batch holding one is split as a copy with NUL as \x01 (one
    byte for one, offsets unchanged; neither is whitespace, a letter or a
    number) and the pieces holding \x01 are cut from the original texts
    again.

    Args:
        texts: string [N].
        delim_pattern, keep_pattern: RE2 patterns, as the op takes them;
            \x00 and \x01 must play the same part in them.
        check: look for a NUL first, and split a batch without one with
            the op alone (False: always the detour; fewer graph nodes, for
            the few texts that hold a special-token string).

    Returns:
        (pieces, start bytes, end bytes), `tf.RaggedTensor`s [N, (pieces)].
    """
    def nul_safe():
        safe = tf.strings.regex_replace(texts, r"\x00", "\x01")
        parts, starts, ends = regex_split_op(safe, delim_pattern, keep_pattern)
        flat = parts.flat_values
        redo = tf.where(tf.strings.regex_full_match(flat, "(?s).*\x01.*"))[:, 0]
        rows = tf.gather(row_ids(parts.row_splits), redo)
        begin = tf.gather(starts.flat_values, redo)
        cut = tf.strings.substr(tf.gather(texts, rows), begin,
                                tf.gather(ends.flat_values, redo) - begin, unit="BYTE")
        flat = tf.tensor_scatter_nd_update(flat, redo[:, None], cut)
        return parts.with_flat_values(flat), starts, ends

    # Most batches hold no NUL: they take the op alone (the detour costs a
    # pass over every piece).
    if not check:
        return nul_safe()
    nul = tf.reduce_any(tf.strings.regex_full_match(texts, r"(?s).*\x00.*"))
    return tf.cond(nul, nul_safe, lambda: regex_split_op(texts, delim_pattern, keep_pattern))


@tf.autograph.experimental.do_not_convert
def with_char_offsets(batch, normalize, tokenize_with_byte_offsets):
    """Pieces of `texts` with CHARACTER offsets into the ORIGINAL text.

    Normalisation (lower-casing, accent stripping) can change byte
    lengths, so every original character is normalised on its own
    (`normalize`: flat string tensor of characters -> same shape), the
    results are joined and tokenized (`tokenize_with_byte_offsets`: [B]
    strings -> ids, start bytes, end bytes, ragged), and each piece's
    byte span is traced back to the original characters.

    Args:
        batch: string [B].

    Returns:
        (ids, starts, ends) [B, (pieces)] as `tokenize_with_offsets`
        documents: int64 code point offsets, `ends` exclusive,
        `text[start:end]` the original text of the piece.
    """
    chars = tf.strings.unicode_split(batch, "UTF-8")  # [B, (chars)]
    normalized = normalize(chars.flat_values)
    nbytes = tf.cast(tf.strings.length(normalized, unit="BYTE"), tf.int64)
    # Byte positions in the concatenation of all normalized texts.
    char_end = tf.cumsum(nbytes)  # [total chars], exclusive end byte
    text_first_char = chars.row_starts()  # [B]
    total_bytes = tf.concat([[0], char_end], 0)
    text_base = tf.gather(total_bytes, text_first_char)  # [B] first byte
    joined = tf.strings.reduce_join(chars.with_flat_values(normalized), axis=1)
    ids, start_bytes, end_bytes = tokenize_with_byte_offsets(joined)
    row_of_piece = ids.value_rowids()
    base = tf.gather(text_base, row_of_piece)
    first_char = tf.gather(text_first_char, row_of_piece)
    start_global = base + tf.cast(start_bytes.flat_values, tf.int64)
    last_global = base + tf.cast(end_bytes.flat_values, tf.int64) - 1
    # The char holding a byte: the first char whose end is past it
    # (characters normalized to nothing are skipped).
    start_char = tf.searchsorted(char_end, start_global, side="right", out_type=tf.int64)
    last_char = tf.searchsorted(char_end, last_global, side="right", out_type=tf.int64)
    starts = start_char - first_char
    # A piece with an empty byte span (one character NFKC-expanded into
    # several SentencePiece pieces) gets an empty span at its start, not
    # a negative one.
    ends = tf.maximum(last_char + 1 - first_char, starts)
    return ids, ids.with_flat_values(starts), ids.with_flat_values(ends)
