"""A Unigram lattice in TensorFlow ops: the best segmentation of normalized
text into pieces as SentencePiece's and the `tokenizers` library's Viterbi
find it, their rounding and tie-breaking included.

    library        path score  in the lattice                  unknown character
    sentencepiece  float32     NORMAL pieces; USER_DEFINED     min NORMAL score - 10 (float32);
                               ones score bytes * max - 0.1    a run is one <unk>, or its bytes
    tokenizers     float64     every piece of the vocabulary   min score - 10 (float64); a run
                               (for us: not the unknown or     is one <unk>, or its bytes when
                               special ones: text is text)     every one has a piece

Both libraries walk the characters in order, add each piece that starts at
a position to the best path score there and keep, at the piece's end, the
first best candidate (a later one replaces it only with a strictly greater
score): of equal paths the one whose last piece starts first wins. A
character that starts no single-character piece starts an unknown piece.
The two differ in the arithmetic: sentencepiece (0.2) stores and adds path
scores as float32 (tensorflow-text's embedded 0.1.96 adds in double, which
breaks ties between "1"+"11" and "11"+"1" otherwise), `tokenizers` in
float64. Here both are the same ops in the one dtype or the other.

The text comes as characters in segments (texts, or words where the
pre-tokenizer splits them: `tokenizers` restarts at every Metaspace word).
Candidates come from one hash table of every suffix of every piece, grown
leftwards one character at a time while some piece still ends with the
text; the Viterbi is a `tf.while_loop` over positions, vectorized over the
segments still running there; the best path is read back by pointer
doubling (log2 of the longest segment steps).
"""

import numpy as np
import tensorflow as tf

#: Table values: a suffix of some piece that is no piece itself; not even that.
_SUFFIX, _NOTHING = -1, -2
#: Positions per step of the Viterbi loop (fewer steps: less loop overhead).
_UNROLL = 4


class UnigramLattice(tf.Module):
    """The Viterbi of a Unigram model over characters.

    Args:
        pieces: the strings the lattice holds (text can become them).
        ids: their vocabulary ids.
        scores: the score each adds to a path, as the library adds it.
        unk_id: the unknown piece's id.
        unk_score: the score an unknown character adds.
        float64: path scores in float64 (`tokenizers`), else float32
            (sentencepiece).
        byte_ids: None, or the ids of the pieces <0x00>..<0xFF> (-1 for a
            missing one): a run of unknown characters becomes the ids of its
            UTF-8 bytes, a missing one <unk> (`bytes_all_or_none`: the whole
            run one <unk> when any byte misses its piece, as `tokenizers`).
    """

    def __init__(self, pieces, ids, scores, unk_id, unk_score, float64=False, byte_ids=None,
                 bytes_all_or_none=False, name=None):
        super().__init__(name=name)
        numpy_dtype = np.float64 if float64 else np.float32
        self.dtype = tf.float64 if float64 else tf.float32
        # A string held twice: the last one, as tokenizers' vocabulary map
        # (sentencepiece refuses duplicates).
        index = {piece: i for i, piece in enumerate(pieces) if piece}
        keys = {}
        for piece in index:
            for start in range(1, len(piece)):
                keys.setdefault(piece[start:], _SUFFIX)
        keys.update(index)
        self._table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(list(keys) or [""], tf.string),
                tf.constant(list(keys.values()) or [_NOTHING], tf.int32)),
            default_value=tf.constant(_NOTHING, tf.int32))
        self._ids = tf.constant(np.asarray(ids, np.int32).reshape([-1]), tf.int32)
        self._scores = tf.constant(np.asarray(scores, numpy_dtype).reshape([-1]), self.dtype)
        self.unk_id = int(unk_id)
        self._unk_score = tf.constant(numpy_dtype(unk_score), self.dtype)
        #: The longest piece, in characters.
        self.max_chars = max([len(p) for p in index] + [1])
        self._byte_ids = None if byte_ids is None else tf.constant(
            np.asarray(byte_ids, np.int32), tf.int32)
        self._bytes_all_or_none = bool(bytes_all_or_none)

    @tf.autograph.experimental.do_not_convert
    def encode(self, chars, splits):
        """The best pieces of each segment.

        Args:
            chars: string [C], the characters of the segments, one after
                the other.
            splits: int64 [S + 1], the segments' row splits into `chars`.

        Returns:
            (ids, starts, ends, piece_splits): flat int32 ids [P] of the
            segments' pieces in order, the int64 indices into `chars` of
            each piece's first character and one past its last (a run of
            unknown characters is one piece; the ids of its bytes share its
            span), and the pieces' row splits by segment [S + 1].
        """
        n = tf.size(chars, out_type=tf.int64)
        segment = row_ids(splits)
        segment_start = tf.gather(splits, segment)
        ends, lengths, ids, scores = self._candidates(chars, n, segment_start)
        # [last character, length - 1] tables of the candidates.
        shape = tf.stack([n, self.max_chars])
        where = tf.stack([ends, lengths - 1], axis=1)
        score_table = tf.tensor_scatter_nd_update(
            tf.fill(shape, tf.constant(-np.inf, self.dtype)), where, scores)
        id_table = tf.tensor_scatter_nd_update(tf.fill(shape, -1), where, ids)
        last = self._viterbi(score_table, splits, segment, segment_start, n)
        return self._best_path(chars, last, id_table, splits, segment, n)

    def _candidates(self, chars, n, segment_start):
        """Every piece (or unknown character) of the text: (flat index of
        its last character, length in characters, id, score)."""
        code = self._table.lookup(chars)
        single = code >= 0
        safe = tf.maximum(code, 0)
        position = tf.range(n)
        # One character: its piece, else an unknown piece.
        first_ids = tf.where(single, tf.gather(self._ids, safe), self.unk_id)
        first_scores = tf.where(single, tf.gather(self._scores, safe), self._unk_score)
        grows = _where((code != _NOTHING) & (position > segment_start))

        def body(k, end, text, found_end, found_length, found_code):
            start = end - k + 1
            text = tf.strings.join([tf.gather(chars, start), text])
            code = self._table.lookup(text)
            hit = _where(code >= 0)
            at = tf.cast(k, tf.int32) - 1
            found_end = found_end.write(at, tf.gather(end, hit))
            found_length = found_length.write(at, tf.fill(tf.shape(hit), k))
            found_code = found_code.write(at, tf.gather(code, hit))
            grows = _where((code != _NOTHING) & (start > tf.gather(segment_start, end)))
            return k + 1, tf.gather(end, grows), tf.gather(text, grows), found_end, \
                found_length, found_code

        def array(dtype, first):
            return tf.TensorArray(dtype, size=1, dynamic_size=True, infer_shape=False,
                                  element_shape=tf.TensorShape([None])).write(0, first)

        # Entry 0: the single characters (their codes point past the pieces:
        # the id and score come from the ones above).
        _, _, _, found_end, found_length, found_code = tf.while_loop(
            lambda k, end, *_: (k <= self.max_chars) & (tf.size(end) > 0),
            body,
            (tf.constant(2, tf.int64), tf.gather(position, grows), tf.gather(chars, grows),
             array(tf.int64, position), array(tf.int64, tf.ones([n], tf.int64)),
             array(tf.int32, tf.zeros([n], tf.int32))),
            shape_invariants=(tf.TensorShape([]), tf.TensorShape([None]),
                              tf.TensorShape([None]), *[tf.TensorShape(None)] * 3))
        longer = found_code.concat()[n:]
        return (found_end.concat(), found_length.concat(),
                tf.concat([first_ids, tf.gather(self._ids, longer)], 0),
                tf.concat([first_scores, tf.gather(self._scores, longer)], 0))

    def _viterbi(self, score_table, splits, segment, segment_start, n):
        """For each character, the length - 1 of the last piece of the best
        path to the end of that character: int32 [C].

        The loop only finds the best path scores, `_UNROLL` positions a step (the
        segments run longest first, so the ones still running at a
        position are a prefix of that order); which candidate gave each
        (the longest of equal ones: it starts first) is found afterwards,
        all at once, by the same additions."""
        k = self.max_chars
        segment_length = splits[1:] - splits[:-1]
        count = tf.size(segment_length, out_type=tf.int64)
        order = tf.argsort(segment_length, direction="DESCENDING", stable=True)
        first = tf.gather(splits[:-1], order)
        longest = tf.reduce_max(tf.concat([segment_length, [1]], 0))
        steps = (longest + _UNROLL - 1) // _UNROLL * _UNROLL  # the loop's steps, padded
        # Segments longer than each position, and their characters there.
        running = count - _search(tf.sort(segment_length), tf.range(steps), "right")
        step = row_ids(tf.concat([[0], tf.cumsum(running)], 0))
        rank = tf.range(tf.reduce_sum(running)) - tf.gather(tf.cumsum(running, exclusive=True),
                                                            step)
        char = tf.gather(first, rank) + step  # step-major
        rows = tf.TensorArray(self.dtype, size=tf.cast(steps, tf.int32), infer_shape=False,
                              element_shape=tf.TensorShape([None, k])).split(
            tf.gather(score_table, char), running)
        # window[:, j]: the best score of the path to j + 1 characters
        # before the current end (-inf before the text).
        window = tf.concat([tf.zeros([count, 1], self.dtype),
                            tf.fill(tf.stack([count, k - 1]),
                                    tf.constant(-np.inf, self.dtype))], 1)

        def body(t, window, best):
            for u in range(_UNROLL):
                scores = rows.read(t + u)
                window = tf.slice(window, [0, 0], tf.shape(scores))
                here = tf.reduce_max(window + scores, axis=1)  # one rounding, in the dtype
                best = best.write(t + u, here)
                window = tf.concat([here[:, None], tf.slice(window, [0, 0], [-1, k - 1])], 1)
            return t + _UNROLL, window, best

        best = tf.TensorArray(self.dtype, size=tf.cast(steps, tf.int32), infer_shape=False,
                              element_shape=tf.TensorShape([None]))
        _, _, best = tf.while_loop(
            lambda t, *_: t < tf.cast(steps, tf.int32), body,
            (tf.constant(0, tf.int32), window, best),
            shape_invariants=(tf.TensorShape([]), tf.TensorShape([None, None]),
                              tf.TensorShape(None)))
        # The best score at every boundary (a segment's start: 0), flat:
        # character c ends at boundary c + segment + 1.
        end_boundary = tf.range(n) + segment + 1
        at_end = tf.scatter_nd(tf.gather(end_boundary, char)[:, None], best.concat(),
                               (n + count)[None])
        # Every candidate again, and the longest that gives the best.
        lengths = tf.range(k, dtype=tf.int64)
        before = end_boundary[:, None] - 1 - lengths[None, :]
        valid = lengths[None, :] <= (tf.range(n) - segment_start)[:, None]
        candidates = tf.gather(at_end, tf.where(valid, before, 0)) + score_table
        equal = valid & tf.equal(candidates, tf.gather(at_end, end_boundary)[:, None])
        return tf.reduce_max(tf.where(equal, tf.range(k)[None, :], -1), axis=1)

    def _best_path(self, chars, last, id_table, splits, segment, n):
        """The pieces of the best path back from each segment's end.

        Positions are the segments' boundaries, flat: character c ends at
        boundary c + segment + 1, a segment starts at boundary start +
        segment."""
        num_segments = tf.size(splits, out_type=tf.int64) - 1
        length = tf.cast(last, tf.int64) + 1
        position = tf.range(n)
        end_boundary = position + segment + 1
        boundaries = n + num_segments
        # The boundary each one's best last piece starts at (a start: itself).
        previous = tf.tensor_scatter_nd_update(tf.range(boundaries), end_boundary[:, None],
                                               end_boundary - length)
        segment_end = splits[1:] + tf.range(num_segments)
        reached = tf.scatter_nd(segment_end[:, None], tf.ones_like(segment_end, tf.int32),
                                boundaries[None])
        longest = tf.reduce_max(tf.concat([splits[1:] - splits[:-1], [0]], 0))

        # Boundaries 1, 2, 4, ... pieces back from an end.
        def body(step, reached, jump):
            pushed = tf.math.unsorted_segment_max(reached, jump, boundaries)
            return step * 2, tf.maximum(reached, pushed), tf.gather(jump, jump)

        _, reached, _ = tf.while_loop(lambda step, *_: step <= longest, body,
                                      (tf.constant(1, tf.int64), reached, previous))
        on_path = _where(tf.gather(reached, end_boundary) > 0)
        piece_end = tf.gather(position, on_path)  # the last character of each piece
        length = tf.gather(length, on_path)
        piece_segment = tf.gather(segment, on_path)
        ids = tf.gather_nd(id_table, tf.stack([piece_end, length - 1], 1))
        starts, ends = piece_end + 1 - length, piece_end + 1
        # A run of unknown pieces is one.
        unknown = tf.equal(ids, self.unk_id)
        same = tf.concat([[False], tf.equal(piece_segment[1:], piece_segment[:-1])], 0)
        fused = unknown & tf.concat([[False], unknown[:-1]], 0) & same
        keep = _where(tf.logical_not(fused))
        group = tf.cumsum(1 - tf.cast(fused, tf.int64)) - 1
        ends = tf.math.unsorted_segment_max(ends, group, tf.size(keep, out_type=tf.int64))
        ids, starts = tf.gather(ids, keep), tf.gather(starts, keep)
        piece_segment = tf.gather(piece_segment, keep)
        if self._byte_ids is not None:
            ids, starts, ends, piece_segment = self._bytes(chars, ids, starts, ends, piece_segment)
        counts = tf.math.unsorted_segment_sum(tf.ones_like(piece_segment), piece_segment,
                                              num_segments)
        return ids, starts, ends, tf.concat([[0], tf.cumsum(counts)], 0)

    def _bytes(self, chars, ids, starts, ends, piece_segment):
        """Unknown pieces as the ids of their UTF-8 bytes (byte fallback)."""
        text = tf.strings.reduce_join(tf.gather(chars, tf.ragged.range(starts, ends)), axis=1)
        values = tf.strings.bytes_split(text)  # [P, (bytes)]
        byte_ids = tf.gather(self._byte_ids, tf.cast(tf.reshape(
            tf.io.decode_raw(values.flat_values, tf.uint8), [-1]), tf.int32))
        missing = byte_ids < 0
        expand = tf.equal(ids, self.unk_id)
        if self._bytes_all_or_none:
            any_missing = tf.math.unsorted_segment_max(
                tf.cast(missing, tf.int32), row_ids(values.row_splits), tf.shape(ids)[0]) > 0
            expand &= tf.logical_not(any_missing)
        byte_ids = tf.where(missing, self.unk_id, byte_ids)
        counts = tf.where(expand, values.row_lengths(), 1)
        piece = row_ids(tf.concat([[0], tf.cumsum(counts)], 0))
        within = tf.range(tf.reduce_sum(counts)) - tf.gather(tf.cumsum(counts, exclusive=True),
                                                             piece)
        from_bytes = tf.gather(byte_ids, tf.gather(values.row_splits, piece) + within)
        new_ids = tf.where(tf.gather(expand, piece), from_bytes, tf.gather(ids, piece))
        return new_ids, tf.gather(starts, piece), tf.gather(ends, piece), tf.gather(
            piece_segment, piece)


def characters(texts):
    """The UTF-8 characters of `texts` [N] (an invalid byte as U+FFFD), in
    few graph nodes (no ragged tensors).

    Returns:
        (chars, code_points, splits, starts, ends): the characters [C]
        (strings), their code points [C] (int32), row splits [N + 1] and
        each one's byte span [start, end) in its text (int64).
    """
    splits, code_points, starts = tf.raw_ops.UnicodeDecodeWithOffsets(
        input=texts, input_encoding="UTF-8", errors="replace", replacement_char=0xFFFD,
        Tsplits=tf.int64)
    n = tf.size(code_points, out_type=tf.int64)
    chars = tf.raw_ops.UnicodeEncode(input_values=code_points, input_splits=tf.range(n + 1),
                                     output_encoding="UTF-8", errors="replace",
                                     replacement_char=0xFFFD)
    rows = row_ids(splits)
    last = tf.equal(tf.range(n) + 1, tf.gather(splits, rows + 1))
    size = tf.gather(tf.cast(tf.strings.length(texts, unit="BYTE"), tf.int64), rows)
    ends = tf.where(last, size, tf.concat([starts[1:], [0]], 0))
    return chars, code_points, splits, starts, ends


def row_ids(splits):
    """Row splits [R + 1] -> the row of each value (int64), in four nodes."""
    splits = tf.cast(splits, tf.int64)
    return tf.raw_ops.UpperBound(sorted_inputs=splits[None], values=tf.range(splits[-1])[None],
                                 out_type=tf.int64)[0] - 1


def _search(sorted_values, values, side):
    """tf.searchsorted of 1-D tensors in one op (int64)."""
    op = tf.raw_ops.UpperBound if side == "right" else tf.raw_ops.LowerBound
    return op(sorted_inputs=sorted_values[None], values=values[None], out_type=tf.int64)[0]


def _where(mask):
    """The indices of the true values of a 1-D mask (int64)."""
    return tf.where(mask)[:, 0]
