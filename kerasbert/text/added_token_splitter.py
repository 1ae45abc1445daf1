"""`AddedTokenSplitter`: texts cut at added-token matches, the text between
them tokenized by a family, each match its one id (the TensorFlow side of
`kerasbert.text.special_strings`).

`SubwordTokenizer` builds one from its added tokens and routes a batch
through it when a pattern is set; a batch without a match costs one regex
search over the batch joined.
"""

import tensorflow as tf

from kerasbert.text.special_strings import WHITESPACE
from kerasbert.text.special_strings import WORD_CHARACTER
from kerasbert.text.string_ops import byte_to_char
from kerasbert.text.string_ops import regex_split_with_offsets
from kerasbert.text.string_ops import row_ids


class AddedTokenSplitter:
    """Splits texts at the matches of a `match_pattern` and tokenizes them.

    Args:
        keys: the strings a match is compared with (each token's content,
            or its normalized content) [K].
        ids: the token id of each key [K].
        single_word_ids: the ids of the `single_word` tokens (a match of
            one that touches a word character is text again).
    """

    def __init__(self, keys, ids, single_word_ids):
        # Matched strings -> ids by comparison with these constants: a few
        # tokens, and no table (a stateful lookup in a tf.data map function
        # measured half the throughput).
        self._keys = tf.constant(list(keys) or [""], tf.string)
        self._values = tf.constant(list(ids) or [-1], tf.int32)
        self._single_word_ids = tf.constant(sorted(single_word_ids) or [-1], tf.int32)
        self._any_single_word = bool(single_word_ids)

    @tf.autograph.experimental.do_not_convert
    def split_tokenize(self, texts, pattern, inner, offsets=False, char_offsets=False,
                       trim_spans=False):
        """Tokenizes `texts` [N] with the matches of `pattern` (added tokens)
        as one id each and the text between them by `inner`.

        Args:
            texts: string [N].
            pattern: `match_pattern` of the tokens to find.
            inner: string [S] -> ids [S, (pieces)], or with `offsets`
                (ids, starts, ends) whose offsets count within each string.
            offsets: also return offsets.
            char_offsets: `inner` counts characters (else UTF-8 bytes);
                offsets into `texts` are returned in the same unit.
            trim_spans: a match's span leaves out the whitespace lstrip /
                rstrip took (a byte-level BPE whose post-processor trims
                offsets: `tokenizers` trims every token's span).

        Returns:
            ids [N, (pieces)] int32, or (ids, starts, ends) with int64
            offsets into `texts`; a match's span is all it matched, its
            token's content with the whitespace lstrip / rstrip took, as
            `tokenizers` gives it (only the content with `trim_spans`).
        """
        # Only the texts holding a match are cut (cutting takes many small
        # ops), and most batches hold none: one search over the batch joined
        # (a match in a text is one there) skips the cutting and the
        # assembling. The text segments are tokenized in the same call as
        # the batch, so the graph holds one copy of the tokenizer (a tf.data
        # iterator optimizes its map function's graph anew, at about half a
        # millisecond a node).
        search = f"(?s).*(?:{pattern}).*"
        any_match = tf.strings.regex_full_match(tf.strings.reduce_join(texts, separator="\n"),
                                                search)

        def cut():
            rows = tf.where(tf.strings.regex_full_match(texts, search))[:, 0]
            matched = tf.gather(texts, rows)
            return (rows, matched) + tuple(self._split_segments(matched, pattern))

        def nothing():
            return tuple(tf.zeros([0], dtype) for dtype in (
                tf.int64, tf.string, tf.string, tf.int64, tf.int64, tf.int32, tf.int64, tf.int64))

        rows, matched, segments, seg_starts, counts, match_ids, lead, trail = tf.cond(
            any_match, cut, nothing)
        is_match = match_ids >= 0
        text_part = tf.where(is_match, tf.zeros_like(segments), segments)
        out = inner(tf.concat([texts, text_part], 0))
        out = out if offsets else (out,)
        assembled = lambda: self._assemble(texts, out, rows, matched, segments, seg_starts,
                                           counts, match_ids, lead, trail, char_offsets,
                                           trim_spans)
        # Without a match, `out` holds the batch's rows alone.
        return tf.cond(any_match, assembled, lambda: out if offsets else out[0])

    @staticmethod
    def _assemble(texts, out, rows, matched, segments, seg_starts, counts, match_ids, lead,
                  trail, char_offsets, trim_spans=False):
        """`split_tokenize`'s result from `out`, the tokenized rows of the
        batch [N] and then of the text segments [S] of the matched texts
        (`_split_segments`' results): ids [N, (pieces)], or (ids, starts,
        ends) where `out` holds offsets."""
        is_match = match_ids >= 0
        offsets = len(out) == 3
        # Flat arithmetic (ragged slicing, concatenation and merging cost a
        # hundred graph nodes each). Rows [0, N) of `out` are the batch's
        # texts, rows [N, N + S) the text segments; the sources are the
        # values of `out`, then one per segment (a match's). An output row
        # is a run of chunks of sources: a plain text's pieces, or each of a
        # matched text's segments (its pieces, or its match).
        splits = out[0].row_splits
        n = tf.size(texts, out_type=tf.int64)
        seg_first = splits[n:-1]
        seg_pieces = splits[n + 1:] - seg_first
        seg_count = tf.size(seg_first, out_type=tf.int64)
        # (a dummy last entry: a batch whose joined text matched across two
        # texts has no segment)
        seg_start = tf.concat([tf.where(is_match, splits[-1] + tf.range(seg_count), seg_first),
                               [0]], 0)
        seg_length = tf.concat([tf.where(is_match, tf.ones_like(seg_pieces), seg_pieces), [0]], 0)
        chunks = tf.tensor_scatter_nd_update(tf.ones([n], tf.int64), rows[:, None], counts)
        chunk_row = row_ids(tf.concat([[0], tf.cumsum(chunks)], 0))
        is_segment = tf.gather(tf.scatter_nd(rows[:, None], tf.ones_like(rows), n[None]) > 0,
                               chunk_row)
        segment = tf.maximum(tf.cumsum(tf.cast(is_segment, tf.int64)) - 1, 0)
        chunk_start = tf.where(is_segment, tf.gather(seg_start, segment),
                               tf.gather(splits, chunk_row))
        chunk_length = tf.where(is_segment, tf.gather(seg_length, segment),
                                tf.gather(splits[1:] - splits[:-1], chunk_row))
        out_splits = tf.concat([[0], tf.cumsum(tf.math.unsorted_segment_sum(
            chunk_length, chunk_row, n))], 0)
        _, source = tf.raw_ops.RaggedRange(starts=chunk_start, limits=chunk_start + chunk_length,
                                           deltas=tf.constant(1, tf.int64), Tsplits=tf.int64)

        def assemble(values, per_segment):
            flat = tf.gather(tf.concat([values, per_segment], 0), source)
            return tf.RaggedTensor.from_row_splits(flat, out_splits, validate=False)

        if not offsets:
            return assemble(out[0].flat_values, match_ids)
        seg_ends = seg_starts + tf.cast(tf.strings.length(segments, unit="BYTE"), tf.int64)
        if trim_spans:
            content = tf.stack([seg_starts + lead, seg_ends - trail], axis=-1)
        else:
            content = tf.stack([seg_starts, seg_ends], axis=-1)
        if char_offsets:
            text_of = tf.repeat(tf.range(tf.shape(counts, out_type=tf.int64)[0]), counts)
            seg_starts = byte_to_char(matched, text_of, seg_starts)
            content = byte_to_char(matched, tf.repeat(text_of, 2), tf.reshape(content, [-1]))
            content = tf.reshape(content, [-1, 2])
        # A segment's pieces count from the segment's start.
        base = tf.concat([tf.zeros([splits[n]], tf.int64),
                          tf.gather(seg_starts, row_ids(splits[n:] - splits[n]))], 0)
        return (assemble(out[0].flat_values, match_ids),
                assemble(out[1].flat_values + base, content[:, 0]),
                assemble(out[2].flat_values + base, content[:, 1]))

    def _split_segments(self, texts, pattern):
        """Texts [N] cut at the matches of `pattern`.

        Returns:
            segments (flat strings [S], text and matches in order), their
            byte starts [S] (int64), segments per text [N] (int64), the
            added-token id of each match (-1 for text) [S] int32, and the
            whitespace bytes lstrip / rstrip took before / after a match's
            content [S] (int64).
        """
        parts, starts, _ = regex_split_with_offsets(texts, pattern, pattern, check=False)
        segments, starts = parts.flat_values, starts.flat_values
        counts = parts.row_lengths()
        where = tf.where(tf.strings.regex_full_match(segments, pattern))
        matches = tf.gather_nd(segments, where)
        left = tf.strings.regex_replace(matches, f"^[{WHITESPACE}]+", "")
        right = tf.strings.regex_replace(matches, f"[{WHITESPACE}]+$", "")
        both = tf.strings.regex_replace(left, f"[{WHITESPACE}]+$", "")
        size = lambda t: tf.cast(tf.strings.length(t, unit="BYTE"), tf.int64)
        # The content is the match itself, else the match without the
        # whitespace a token's lstrip / rstrip took (a content may itself
        # begin or end with whitespace: the exact form is tried first).
        forms = tf.stack([matches, left, right, both], axis=1)  # [M, 4]
        equal = tf.equal(forms[:, :, None], self._keys[None, None, :])  # [M, 4, K]
        hit = tf.reduce_any(equal, axis=2)
        form = tf.argmax(tf.cast(hit, tf.int32), axis=1, output_type=tf.int32)  # first hit
        key = tf.argmax(tf.cast(tf.gather(equal, form, batch_dims=1), tf.int32), axis=1)
        ids = tf.where(tf.reduce_any(hit, axis=1), tf.gather(self._values, key), -1)
        # lstrip took the whitespace before the content in forms 1 and 3
        # (left, both); rstrip that after it in forms 2 and 3 (right, both).
        lead = tf.where((form == 1) | (form == 3), size(matches) - size(left), 0)
        trail = tf.where(form == 2, size(matches) - size(right),
                         tf.where(form == 3, size(left) - size(both), 0))
        shape = tf.shape(segments, out_type=tf.int64)
        ids = tf.tensor_scatter_nd_update(tf.fill(shape, tf.constant(-1, tf.int32)), where, ids)
        lead = tf.scatter_nd(where, lead, shape)
        trail = tf.scatter_nd(where, trail, shape)
        if self._any_single_word:
            ids = self._single_word_check(texts, parts, starts, ids, lead, trail)
            segments, starts, counts, ids, lead, trail = merge_text_segments(
                segments, starts, parts.value_rowids(), counts, ids, lead, trail)
        return segments, starts, counts, ids, lead, trail

    def _single_word_check(self, texts, parts, starts, ids, lead, trail):
        """ids with the matches of `single_word` tokens that touch a word
        character set back to text (-1)."""
        rows = parts.value_rowids()
        text = tf.gather(texts, rows)
        begin = starts + lead
        end = starts + tf.cast(tf.strings.length(parts.flat_values, unit="BYTE"), tf.int64) - trail
        before = tf.strings.substr(text, tf.zeros_like(begin), begin, unit="BYTE")
        after = tf.strings.substr(text, end, tf.fill(tf.shape(end), tf.constant(2**31 - 1, tf.int64)),
                                  unit="BYTE")
        touches = (tf.strings.regex_full_match(before, f"(?s).*{WORD_CHARACTER}")
                   | tf.strings.regex_full_match(after, f"(?s){WORD_CHARACTER}.*"))
        single = tf.reduce_any(tf.equal(ids[:, None], self._single_word_ids[None, :]), axis=1)
        return tf.where(single & touches, -1, ids)


def merge_text_segments(segments, starts, rows, counts, ids, lead, trail):
    """Joins runs of adjacent text segments of one text (a match set back to
    text sits between its neighbours again); same returns as
    `AddedTokenSplitter._split_segments`."""
    is_text = ids < 0
    n = tf.shape(segments, out_type=tf.int64)[0]
    same_row = tf.concat([[False], tf.equal(rows[1:], rows[:-1])], 0)
    joins = same_row & is_text & tf.concat([[False], is_text[:-1]], 0)
    new = tf.logical_not(joins)
    group = tf.cumsum(tf.cast(new, tf.int64)) - 1
    groups = tf.reduce_sum(tf.cast(new, tf.int64))
    first = tf.boolean_mask(tf.range(n), new)
    merged = tf.strings.unsorted_segment_join(segments, group, groups)
    new_rows = tf.gather(rows, first)
    new_counts = tf.math.unsorted_segment_sum(tf.ones_like(new_rows), new_rows,
                                              tf.shape(counts, out_type=tf.int64)[0])
    return (merged, tf.gather(starts, first), new_counts, tf.gather(ids, first),
            tf.gather(lead, first), tf.gather(trail, first))
