"""Packs WordPiece ids into BERT inputs: `[CLS] a [SEP] (b [SEP])`, padded.

Truncation follows the original BERT (`_truncate_seq_pair` in
google-research/bert run_classifier.py): while the pair is too long, drop the
last piece of the LONGER segment, of `b` when they are equally long. This is
tensorflow-text's `ShrinkLongestTrimmer` except for ties (which trims the
first segment on a tie), so we compute the kept lengths in closed form.
"""

import tensorflow as tf


def _as_ragged(segment):
    """-> (RaggedTensor [B, (pieces)], was_unbatched)."""
    if not isinstance(segment, tf.RaggedTensor):
        segment = tf.convert_to_tensor(segment)
        if segment.shape.rank == 1:  # One example, e.g. inside Dataset.map.
            return tf.RaggedTensor.from_tensor(segment[tf.newaxis]), True
        segment = tf.RaggedTensor.from_tensor(segment)
    if segment.ragged_rank > 1:  # [B, (words), (pieces)] -> [B, (pieces)].
        segment = segment.merge_dims(-2, -1)
    return segment, False


def pair_lengths(len_a, len_b, budget):
    """Kept lengths of a pair under `budget` pieces (original BERT rule).

    Repeatedly removing one piece from the longer segment (from `b` on a tie)
    ends at a = min(len_a, max(ceil(budget / 2), budget - len_b)), b = budget
    - a, when the pair does not fit; untouched when it does.

    Args:
        len_a, len_b: int64 [B] segment lengths.
        budget: scalar, pieces left after [CLS] and the two [SEP]s.
    """
    budget = tf.cast(budget, len_a.dtype)
    fits = len_a + len_b <= budget
    half_up = (budget + 1) // 2
    keep_a = tf.minimum(len_a, tf.maximum(half_up, budget - len_b))
    keep_a = tf.where(fits, len_a, keep_a)
    keep_b = tf.where(fits, len_b, budget - keep_a)
    return keep_a, keep_b


class BertPacker(tf.Module):
    """Makes `input_word_ids`, `input_mask`, `input_type_ids` from pieces.

    Layout: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, truncated to
    `sequence_length` (pair: the longer segment first, `b` on a tie; single: the
    tail), then padded with `pad_id`. `input_type_ids` is 0 on `[CLS] a
    [SEP]`, 1 on `b [SEP]`, 0 on padding; `input_mask` is 1 on real tokens.

    Args:
        sequence_length: output length T (>= 3 for pairs, >= 2 for singles).
        cls_id, sep_id, pad_id: special ids (see `from_tokenizer`).

    Call args:
        a: int ids [B, (pieces)] (ragged or dense), [B, (words), (pieces)],
            or one example [pieces].
        b: optional second segment, same batch size.
        sequence_length: optional T overriding the constructor's: a Python int,
            or an int32 scalar tensor (as the exported TF Hub
            `bert_pack_inputs` takes it; then the outputs are [B, None]
            statically and a too-small value fails when run).

    Returns:
        dict of int32 tensors [B, T] (or [T] for one unbatched example).

    Example:

    >>> from kerasbert.text import BertPacker
    >>> packer = BertPacker(8, cls_id=2, sep_id=3, pad_id=0)
    >>> inputs = packer([[5, 6, 7]], [[8, 9]])        # a, b: [B, (pieces)]
    >>> for name, tensor in inputs.items():           # each int32 [B, T]
    ...     print(name, tensor.numpy().tolist())
    input_word_ids [[2, 5, 6, 7, 3, 8, 9, 3]]
    input_mask [[1, 1, 1, 1, 1, 1, 1, 1]]
    input_type_ids [[0, 0, 0, 0, 0, 1, 1, 1]]
    """

    # The pair layout: separators between the segments, and b's type id.
    # RoBERTa (RobertaPacker) puts two separators there and has one type.
    pair_separators = 1
    second_type_id = 1

    def __init__(self, sequence_length, cls_id, sep_id, pad_id, name=None):
        super().__init__(name=name)
        sequence_length = int(sequence_length)
        if sequence_length < 2:
            raise ValueError(f"sequence_length must be at least 2, got {sequence_length}.")
        self.sequence_length = sequence_length
        self.cls_id, self.sep_id, self.pad_id = int(cls_id), int(sep_id), int(pad_id)

    @classmethod
    def from_tokenizer(cls, tokenizer, sequence_length, **kwargs):
        """Takes the special ids from a tokenizer (`cls_id`, `sep_id`,
        `pad_id`)."""
        return cls(sequence_length, tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id, **kwargs)

    # No tensor-dependent Python control flow here: skipping AutoGraph makes
    # tracing (tf.data.map, tf.function) several times faster.
    @tf.autograph.experimental.do_not_convert
    def __call__(self, a, b=None, sequence_length=None):
        sequence_length = self._checked_seq_length(sequence_length, pair=b is not None)
        a, unbatched = _as_ragged(a)
        len_a = a.row_lengths()
        if b is None:
            keep_a = tf.minimum(len_a, tf.cast(sequence_length - 2, tf.int64))
            keep_b = None
        else:
            b, _ = _as_ragged(b)
            keep_a, keep_b = pair_lengths(len_a, b.row_lengths(),
                                          sequence_length - 2 - self.pair_separators)
        outputs = self._dense_layout(a, b, keep_a, keep_b, sequence_length)
        if unbatched:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs

    def _dense_layout(self, a, b, keep_a, keep_b, sequence_length):
        """`[CLS] a[:keep_a] [SEP] (b[:keep_b] [SEP])`, padded, with dense
        position arithmetic: each segment is padded to [B, T] once and read
        at shifted positions (a few element-wise ops, a gather for `b`).
        The same ids as tensorflow-text's `combine_segments` +
        `pad_model_inputs`, whose ragged branches cost every `tf.data`
        iterator start (every epoch) a third of a second.

        Args:
            a, b: ragged [B, (pieces)] (b None for single segments).
            keep_a, keep_b: int64 [B] pieces kept of each (keep_b None).
            sequence_length: T, a Python int or an int32 scalar tensor.
        """
        length = tf.cast(sequence_length, tf.int64)
        rows = a.nrows(out_type=tf.int64)
        position = tf.range(length, dtype=tf.int64)[tf.newaxis, :]  # [1, T]
        keep_a = keep_a[:, tf.newaxis]
        # a's piece p sits at position p + 1: pad to T, then shift right by one.
        dense_a = tf.cast(a.to_tensor(self.pad_id, shape=tf.stack([rows, length])), tf.int32)
        ids = tf.concat([tf.fill([rows, 1], self.cls_id), dense_a[:, :-1]], axis=1)
        first_sep = keep_a + 1
        ids = tf.where(position < first_sep, ids, self.pad_id)
        ids = tf.where(position == first_sep, self.sep_id, ids)
        end = first_sep
        type_ids = None
        if b is not None:
            keep_b = keep_b[:, tf.newaxis]
            start_b = first_sep + self.pair_separators
            end = start_b + keep_b  # its final separator
            dense_b = tf.cast(b.to_tensor(self.pad_id, shape=tf.stack([rows, length])),
                              tf.int32)
            in_b = (position >= start_b) & (position < end)
            index = tf.clip_by_value(position - start_b, 0, tf.maximum(length - 1, 0))
            ids = tf.where(in_b, tf.gather(dense_b, index, batch_dims=1), ids)
            # The separators after a (RoBERTa: two) and b's final one.
            is_sep = ((position > first_sep) & (position < start_b)) | (position == end)
            ids = tf.where(is_sep, self.sep_id, ids)
            type_ids = self.second_type_id * tf.cast(
                (position > first_sep) & (position <= end), tf.int32)
        mask = tf.cast(position <= end, tf.int32)
        if type_ids is None:
            type_ids = tf.zeros_like(mask)
        return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": type_ids}

    def _checked_seq_length(self, sequence_length, pair):
        """The T to pack to: the constructor's, or a call's override (a
        Python int is checked now, a tensor when the graph runs)."""
        minimum, what = (2 + self.pair_separators, "pairs") if pair else (2, "single segments")
        message = f"sequence_length must be at least {minimum} for {what}"
        if sequence_length is None:
            sequence_length = self.sequence_length
        if tf.is_tensor(sequence_length):
            sequence_length = tf.cast(sequence_length, tf.int32)
            check = tf.debugging.assert_greater_equal(sequence_length, minimum, message=message)
            with tf.control_dependencies([check]):
                return tf.identity(sequence_length)
        sequence_length = int(sequence_length)
        if sequence_length < minimum:
            raise ValueError(f"{message}, got {sequence_length}.")
        return sequence_length
