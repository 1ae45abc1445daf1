"""Extractive QA windows in the graph, one place for training and serving.

`QAWindows` cuts every (question, context) of a batch into the windows
`kerasbert.data.finetuning.qa.convert_qa` makes in Python (`[CLS] question
[SEP] context window [SEP]`, RoBERTa: `<s> q </s></s> ctx </s>`, windows
`doc_stride` pieces apart, character offsets and max-context flags per
token), and maps SQuAD answers (character spans) to the start/end token of
every window as `convert_qa(is_training=True)` does (0 = [CLS] where the
window does not hold the whole answer). TensorFlow ops only: the
preprocessor (`QuestionAnswererPreprocessor`) runs it in a `tf.data` map
and the exported SavedModel (`kerasbert.serving.qa_serving`) in its graph.

Shapes below: B examples, P context pieces of the whole batch, W windows of
the whole batch (every example has at least one), T = sequence_length,
K = most windows one piece can be in.

How it is vectorised:
- every example's windows are regular: they start `stride = min(max_doc,
  doc_stride)` pieces apart and all but the last hold `max_doc = T -
  len(question) - 3` pieces (- 4 with RoBERTa's two separators: the
  tokenizer's `kerasbert.text.SegmentLayout`, shared with `convert_qa`), so
  window counts, starts and lengths are closed forms of the piece counts,
  and a piece lies in at most K consecutive windows;
- all windows of the batch come out as one [W, T] batch; `example_index`
  [W] maps them back.
"""

import math

import numpy as np
import tensorflow as tf

from kerasbert.preprocessing.task_preprocessor import clean_text

#: The code points Python's `str.isspace` (and so `str.split`) takes for
#: whitespace, which `convert_qa`'s answer checks use.
PYTHON_WHITESPACE = (0x9, 0xA, 0xB, 0xC, 0xD, 0x1C, 0x1D, 0x1E, 0x1F, 0x20, 0x85, 0xA0, 0x1680,
                     *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000)
_WHITESPACE_RUNS = "[" + "".join(f"\\x{{{c:x}}}" for c in PYTHON_WHITESPACE) + "]+"
#: How far past an answer's length `convert_qa` looks for it when the
#: whitespace differs.
ANSWER_SLACK = 32


def first_argmax(values, axis):
    """Index of the FIRST maximum along `axis` (tf.argmax does not promise
    which one on ties; the Python decoder keeps the earliest).

    Args:
        values: float [..., N] (N along `axis`, here the last axis).

    Returns:
        (max [...], int64 index [...]); index 0 when every value is -inf.
    """
    best = tf.reduce_max(values, axis=axis)
    size = tf.shape(values, out_type=tf.int64)[axis]
    position = tf.range(size)
    hit = tf.equal(values, tf.expand_dims(best, axis))
    index = tf.reduce_min(tf.where(hit, position, size), axis=axis)
    return best, tf.minimum(index, tf.maximum(size - 1, 0))


def max_context_score(position, window_start, window_length):
    """BERT's `_check_is_max_context` score of a piece in a window:
    min(pieces left, pieces right) + 0.01 * window length.

    Computed in float64 with the same operations as `qa._max_context`, so
    the comparisons (and float rounding on ties between a full window and
    a shorter last one) are the Python pipeline's, bit for bit.

    Args:
        position, window_start, window_length: int64, same shape.

    Returns:
        float64, same shape.
    """
    left = position - window_start
    right = window_start + window_length - 1 - position
    return tf.cast(tf.minimum(left, right), tf.float64) + 0.01 * tf.cast(
        window_length, tf.float64
    )


def row_ids(ragged):
    """`ragged.value_rowids()` [N] int64 in two ops: the row of value i is
    the number of rows that end at or before it. (`value_rowids` adds some
    70 graph nodes, and every node costs each `tf.data` iterator start,
    which a raw-text `fit` pays every epoch.)"""
    splits = ragged.row_splits
    values = tf.range(splits[-1], dtype=splits.dtype)
    return tf.cast(tf.searchsorted(splits[1:], values, side="right"), tf.int64)


def _take(ragged, index, fill):
    """ragged.flat_values[index], `fill` where index is one past the end."""
    values = tf.concat([ragged.flat_values, tf.constant([fill], ragged.dtype)], 0)
    return tf.gather(values, index)


class QAWindows:
    """The windows of a tokenizer's layout at one length and stride.

    Args:
        layout: the tokenizer's `kerasbert.text.SegmentLayout`.
        sequence_length: T, window length in pieces (>= max_query_length +
            4; + 5 with RoBERTa's two separators).
        doc_stride: pieces between window starts (128).
        max_query_length: question pieces kept (64).

    Example:

    >>> import os, tempfile
    >>> from kerasbert.preprocessing import QAWindows
    >>> from kerasbert.text import WordPieceTokenizer, segment_layout, write_vocab
    >>> vocab = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> write_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...              "the", "movie", "was", "good", "bad"], vocab)
    >>> tokenizer = WordPieceTokenizer(vocab)
    >>> cutter = QAWindows(segment_layout(tokenizer), sequence_length=10, doc_stride=2,
    ...                    max_query_length=2)
    >>> context = "the movie was good the movie was bad"
    >>> pieces = cutter.tokenize(tokenizer, ["the movie"], [context])
    >>> windows = cutter.windows(*pieces)
    >>> windows["num_windows"].numpy().tolist()              # per example [B]
    [3]
    >>> windows["input_word_ids"].numpy().tolist()           # [W, T], 2 pieces apart
    [[2, 5, 6, 3, 5, 6, 7, 8, 5, 3], [2, 5, 6, 3, 7, 8, 5, 6, 7, 3],
     [2, 5, 6, 3, 5, 6, 7, 9, 3, 0]]
    """

    def __init__(self, layout, sequence_length, doc_stride=128, max_query_length=64):
        self.layout = layout
        self.sequence_length = int(sequence_length)
        self.doc_stride = int(doc_stride)
        self.max_query_length = int(max_query_length)
        if min(self.doc_stride, self.max_query_length) < 1:
            raise ValueError(
                "doc_stride and max_query_length must be positive, got "
                f"{doc_stride}, {max_query_length}."
            )
        # Room for at least one context piece after the longest question.
        shortest = self.max_query_length + layout.special_tokens() + 1
        if self.sequence_length < shortest:
            raise ValueError(
                f"sequence_length {self.sequence_length} leaves no room for the context after a "
                f"question of up to {self.max_query_length} pieces; use at least "
                f"{shortest}."
            )
        # A piece is in at most ceil(max_doc / stride) windows, and max_doc /
        # stride <= max(1, max_doc(empty question) / doc_stride).
        longest_doc = self.sequence_length - layout.special_tokens()
        self.max_windows_per_piece = max(1, math.ceil(longest_doc / self.doc_stride))

    def tokenize(self, tokenizer, questions, contexts, offsets=True):
        """Strings [B] -> (question ids [B, (Q)] cut to max_query_length,
        context ids [B, (P)], their code point starts and ends (None
        without `offsets`)), both texts made valid UTF-8 (`clean_text`) as
        in training and serving."""
        question_ids = tokenizer.tokenize_ids(clean_text(questions))[:, : self.max_query_length]
        contexts = clean_text(contexts)
        if not offsets:
            return question_ids, tokenizer.tokenize_ids(contexts), None, None
        return (question_ids, *tokenizer.tokenize_with_offsets(contexts))

    # --- windows ------------------------------------------------------------

    def window_layout(self, query_length, num_pieces):
        """Per example: window room, stride and count (`qa._doc_spans`).

        Args:
            query_length, num_pieces: int64 [B].

        Returns:
            (max_doc, stride, num_windows), int64 [B]. An empty context
            still gets one (empty) window.
        """
        # T - offset of the context - its final separator (qa.convert_qa).
        max_doc = self.sequence_length - self.layout.second_offset(query_length) - 1
        stride = tf.minimum(max_doc, self.doc_stride)
        extra = tf.maximum(num_pieces - max_doc, 0)
        num_windows = 1 + (extra + stride - 1) // stride
        return max_doc, stride, num_windows

    def num_windows(self, question_ids, context_ids):
        """int64 [B]: the windows each example is cut into."""
        return self.window_layout(tf.cast(question_ids.row_lengths(), tf.int64),
                                  tf.cast(context_ids.row_lengths(), tf.int64))[2]

    def best_window_per_piece(self, pieces, max_doc, stride, num_windows, first_window):
        """The window each context piece has its max context in
        (`qa._max_context`: the best score, the earliest window on ties).

        Args:
            pieces: ragged [B, (P)] context pieces (only the layout is used).
            max_doc, stride, num_windows: int64 [B].
            first_window: int64 [B], the global index of each example's
                first window.

        Returns:
            int64 [P], a global window index per piece.
        """
        example = row_ids(pieces)  # [P]
        position = tf.range(tf.shape(pieces.flat_values, out_type=tf.int64)[0])
        position -= tf.gather(pieces.row_starts(), example)  # in its context
        step = tf.gather(stride, example)
        # Candidates [P, K], earliest first: the last window starting at or
        # before the piece, and the K - 1 windows before it.
        last = tf.minimum(position // step, tf.gather(num_windows, example) - 1)
        k = tf.range(self.max_windows_per_piece, dtype=tf.int64)
        window = last[:, tf.newaxis] - (self.max_windows_per_piece - 1) + k
        start = window * step[:, tf.newaxis]
        length = tf.minimum(
            tf.gather(pieces.row_lengths(), example)[:, tf.newaxis] - start,
            tf.gather(max_doc, example)[:, tf.newaxis],
        )
        position = position[:, tf.newaxis]
        inside = (window >= 0) & (position < start + length)
        score = tf.where(
            inside, max_context_score(position, start, length), tf.constant(-np.inf, tf.float64)
        )
        _, best = first_argmax(score, axis=1)
        chosen = tf.gather(window, best[:, tf.newaxis], batch_dims=1)[:, 0]
        return tf.gather(first_window, example) + chosen

    def windows(self, question_ids, context_ids, context_starts, context_ends):
        """Windows of every example -> model inputs and decoding extras.

        Args:
            question_ids: int ragged [B, (Q)], already cut to
                max_query_length.
            context_ids: int ragged [B, (P)].
            context_starts, context_ends: int64 ragged [B, (P)] code point
                offsets.

        Returns:
            a dict: input_word_ids / input_mask / input_type_ids int32
            [W, T]; example_index int64 [W]; num_windows int64 [B];
            start_char / end_char int64 [W, T] (-1 off context);
            in_context, is_max_context bool [W, T]; window_start (its
            first context piece), window_length (its context pieces) and
            context_offset (the position of that first piece) int64 [W].
        """
        question_ids, context_ids, context_starts, context_ends = (
            x.with_row_splits_dtype(tf.int64)
            for x in (question_ids, context_ids, context_starts, context_ends))
        query_length = question_ids.row_lengths()
        num_pieces = context_ids.row_lengths()
        max_doc, stride, num_windows = self.window_layout(query_length, num_pieces)
        windows = tf.ragged.range(num_windows)  # [B, (windows)]
        example = row_ids(windows)  # [W]
        best_window = self.best_window_per_piece(
            context_ids, max_doc, stride, num_windows, windows.row_starts()
        )
        span = self._window_spans(windows, example, query_length, num_pieces, max_doc, stride)
        ids, piece_index = self._window_ids(question_ids, context_ids, example, span)
        position, offset, length = span["position"], span["offset"], span["length"]
        global_window = tf.range(tf.shape(example, out_type=tf.int64)[0])[:, tf.newaxis]
        best_window = tf.concat([best_window, [-1]], 0)
        return {
            "input_word_ids": tf.cast(ids, tf.int32),
            "input_mask": tf.cast(position <= offset + length, tf.int32),
            "input_type_ids": self.layout.second_type_id * tf.cast(
                (position >= offset) & (position <= offset + length), tf.int32
            ),
            "example_index": example,
            "num_windows": num_windows,
            "start_char": _take(context_starts, piece_index, -1),
            "end_char": _take(context_ends, piece_index, -1),
            "in_context": span["in_context"],
            "is_max_context": span["in_context"] & tf.equal(
                tf.gather(best_window, piece_index), global_window
            ),
            "window_start": span["start"][:, 0],
            "window_length": length[:, 0],
            "context_offset": offset[:, 0],
        }

    def _window_spans(self, windows, example, query_length, num_pieces, max_doc, stride):
        """Where each window's parts sit in its [T] row.

        Returns:
            a dict of int64 / bool tensors: position [1, T]; per window
            [W, 1]: q_len, start (its first context piece), length (its
            context pieces), offset (the position of that first piece); and
            [W, T] masks is_question, in_context, is_sep.
        """
        def per_window(values):  # [B] -> [W, 1]
            return tf.gather(values, example)[:, tf.newaxis]

        local = windows.flat_values[:, tf.newaxis]  # window index in its example
        q_len = per_window(query_length)
        start = local * per_window(stride)
        length = tf.minimum(per_window(num_pieces) - start, per_window(max_doc))
        offset = self.layout.second_offset(q_len)  # [CLS] question [SEP](s)
        position = tf.range(self.sequence_length, dtype=tf.int64)[tf.newaxis, :]  # [1, T]
        return {
            "position": position, "q_len": q_len, "start": start, "length": length,
            "offset": offset,
            "is_question": (position >= 1) & (position <= q_len),
            "in_context": (position >= offset) & (position < offset + length),
            "is_sep": ((position > q_len) & (position < offset)) | (position == offset + length),
        }

    def _window_ids(self, question_ids, context_ids, example, span):
        """(ids int64 [W, T] of `[CLS] question [SEP](s) context [SEP]`,
        padded; piece_index int64 [W, T]: each position's flat index into
        the context pieces, one past the last off the context)."""
        position = span["position"]

        def row_start(ragged):  # [W, 1]: each window's example's first value
            return tf.gather(ragged.row_starts(), example)[:, tf.newaxis]

        # Flat indices into the ragged values; the extra last element stands
        # in off the span, so gathers never go out of range (even for P = 0).
        question_index = tf.where(
            span["is_question"], row_start(question_ids) + position - 1,
            tf.shape(question_ids.flat_values, out_type=tf.int64)[0],
        )
        piece_index = tf.where(
            span["in_context"], row_start(context_ids) + span["start"] + position - span["offset"],
            tf.shape(context_ids.flat_values, out_type=tf.int64)[0],
        )
        layout = self.layout
        pad = layout.pad_id
        ids = tf.where(span["is_question"], _take(question_ids, question_index, pad), pad)
        ids = tf.where(span["in_context"], _take(context_ids, piece_index, pad), ids)
        ids = tf.where(span["is_sep"], layout.sep_id, ids)
        ids = tf.where(position == 0, layout.start_id, ids)
        return ids, piece_index

    # --- answers ------------------------------------------------------------

    def answer_positions(self, windows, context_starts, context_ends, answer_start,
                         answer_end):
        """Start/end token of the answer in every window, as `convert_qa`
        labels them: the first and last context piece that overlap the
        answer's characters, when the window holds both; else 0 ([CLS]),
        as for a question without an answer.

        Args:
            windows: the `windows` output.
            context_starts, context_ends: int64 ragged [B, (P)] code point
                offsets of the context pieces.
            answer_start, answer_end: int [B], the answer's code points in
                its context (end exclusive); -1 for no answer.

        Returns:
            (start_positions, end_positions) int32 [W]. An answer that
            covers no piece (only whitespace or dropped characters) fails
            when the graph runs, as `convert_qa` refuses it.
        """
        answer_start = tf.cast(answer_start, tf.int64)
        answer_end = tf.cast(answer_end, tf.int64)
        starts = context_starts.with_row_splits_dtype(tf.int64)
        ends = context_ends.with_row_splits_dtype(tf.int64)
        rows = row_ids(starts)  # [P]
        batch = tf.shape(answer_start, out_type=tf.int64)[0]
        piece = tf.range(tf.shape(starts.flat_values, out_type=tf.int64)[0])
        piece -= tf.gather(starts.row_starts(), rows)
        overlap = ((ends.flat_values > tf.gather(answer_start, rows))
                   & (starts.flat_values < tf.gather(answer_end, rows)))
        big = tf.constant(np.iinfo(np.int64).max, tf.int64)
        first = tf.math.unsorted_segment_min(tf.where(overlap, piece, big), rows, batch)
        last = tf.math.unsorted_segment_max(tf.where(overlap, piece, -1), rows, batch)
        has_answer = answer_start >= 0
        check = tf.debugging.Assert(
            tf.reduce_all(~has_answer | (last >= 0)),
            ["an answer covers no token of its context (only whitespace or characters the "
             "tokenizer drops): answer_start", answer_start, "answer_end", answer_end])
        with tf.control_dependencies([check]):
            example = tf.identity(windows["example_index"])
        first, last = tf.gather(first, example), tf.gather(last, example)
        start, length = windows["window_start"], windows["window_length"]
        inside = tf.gather(has_answer, example) & (first >= start) & (last < start + length)
        offset = windows["context_offset"]
        return (tf.cast(tf.where(inside, first - start + offset, 0), tf.int32),
                tf.cast(tf.where(inside, last - start + offset, 0), tf.int32))


def _collapse(texts):
    """Python's `" ".join(text.split())` on a string tensor."""
    single = tf.strings.regex_replace(texts, _WHITESPACE_RUNS, " ")
    return tf.strings.regex_replace(single, "^ | $", "")


def answer_char_spans(contexts, texts, starts):
    """SQuAD answers (text, answer_start) -> their code point spans in the
    contexts, as `convert_qa` finds them: the text at `answer_start`, or
    the same words with other whitespace (then the span ends after as
    many non-space characters as the text has).

    Args:
        contexts, texts: string [B] (valid UTF-8).
        starts: int [B], code points; < 0 for a question without an answer.

    Returns:
        (start, end) int64 [B], -1 both for no answer. An answer whose text
        is not at its start fails when the graph runs, naming both.
    """
    starts = tf.cast(starts, tf.int64)
    has_answer = starts >= 0
    context_length = tf.cast(tf.strings.length(contexts, unit="UTF8_CHAR"), tf.int64)
    text_length = tf.cast(tf.strings.length(texts, unit="UTF8_CHAR"), tf.int64)
    in_range = has_answer & (starts <= context_length)
    at = tf.clip_by_value(starts, 0, context_length)
    exact = tf.equal(tf.strings.substr(contexts, at, text_length, unit="UTF8_CHAR"), texts)
    wanted = _collapse(texts)
    window = _collapse(tf.strings.substr(contexts, at, text_length + ANSWER_SLACK,
                                         unit="UTF8_CHAR"))
    wanted_bytes = tf.strings.length(wanted)
    similar = (wanted_bytes > 0) & tf.equal(
        tf.strings.substr(window, tf.zeros_like(wanted_bytes), wanted_bytes), wanted)
    matches = in_range & (exact | similar)
    check = tf.debugging.Assert(
        tf.reduce_all(~has_answer | matches),
        ["an answer's text is not at its answer_start in its context: texts", texts,
         "answer_start", starts], summarize=8)
    # The end when the whitespace differs: after as many non-space
    # characters from the start as the text has (`qa._answer_end`).
    spaces = tf.constant(PYTHON_WHITESPACE, tf.int32)

    def non_space(strings):
        points = tf.strings.unicode_decode(strings, "UTF-8")
        flat = points.flat_values
        keep = ~tf.reduce_any(tf.equal(flat[:, tf.newaxis], spaces), axis=1)
        return points.with_flat_values(tf.cast(keep, tf.int64)).with_row_splits_dtype(tf.int64)

    wanted_count = tf.reduce_sum(non_space(texts), axis=1)
    counted = non_space(contexts)
    rows = row_ids(counted)
    position = tf.range(tf.shape(counted.flat_values, out_type=tf.int64)[0])
    position -= tf.gather(counted.row_starts(), rows)
    flags = counted.flat_values * tf.cast(position >= tf.gather(at, rows), tf.int64)
    running = tf.cumsum(flags)
    before_row = tf.gather(tf.concat([[0], running], 0), tf.gather(counted.row_starts(), rows))
    seen = running - before_row  # non-space characters in [start, position]
    hit = (flags > 0) & tf.equal(seen, tf.gather(wanted_count, rows))
    big = tf.constant(np.iinfo(np.int64).max, tf.int64)
    batch = tf.shape(starts, out_type=tf.int64)[0]
    found = tf.math.unsorted_segment_min(tf.where(hit, position, big), rows, batch)
    loose_end = tf.where(wanted_count == 0, at,
                         tf.where(found < big, found + 1, context_length))
    end = tf.where(exact, at + text_length, loose_end)
    with tf.control_dependencies([check]):
        return (tf.where(has_answer, starts, -1), tf.where(has_answer, end, -1))
