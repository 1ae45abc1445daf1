"""Packs WordPiece ids into BERT inputs: `[CLS] a [SEP] (b [SEP])`, padded.

Truncation follows the original BERT (`_truncate_seq_pair` in
google-research/bert run_classifier.py): while the pair is too long, drop the
last piece of the LONGER segment, of `b` when they are equally long. This is
tensorflow-text's `ShrinkLongestTrimmer` except for ties (which trims the
first segment on a tie), so we compute the kept lengths in closed form.
"""

import tensorflow as tf


def _as_ragged(segment):
    """-> (int32 RaggedTensor [B, (pieces)], was_unbatched)."""
    if not isinstance(segment, tf.RaggedTensor):
        segment = tf.convert_to_tensor(segment)
        if segment.shape.rank == 1:  # One example, e.g. inside Dataset.map.
            return tf.RaggedTensor.from_tensor(segment[tf.newaxis]), True
        segment = tf.RaggedTensor.from_tensor(segment)
    if segment.ragged_rank > 1:  # [B, (words), (pieces)] -> [B, (pieces)].
        segment = segment.merge_dims(-2, -1)
    return segment, False


def _keep_first(segment, lengths):
    """segment[i, :lengths[i]] for a ragged [B, (n)]."""
    keep = tf.ragged.range(segment.row_lengths()) < lengths[:, tf.newaxis]
    return tf.ragged.boolean_mask(segment, keep)


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
        import tensorflow_text as tf_text

        sequence_length = self._checked_seq_length(sequence_length, pair=b is not None)
        a, unbatched = _as_ragged(a)
        a = tf.cast(a, tf.int32)
        if b is None:
            budget = tf.cast(sequence_length - 2, tf.int64)
            segments = [_keep_first(a, tf.fill([a.nrows()], budget))]
        else:
            b, _ = _as_ragged(b)
            b = tf.cast(b, tf.int32)
            keep_a, keep_b = pair_lengths(a.row_lengths(), b.row_lengths(),
                                          sequence_length - 2 - self.pair_separators)
            b = _keep_first(b, keep_b)
            if self.pair_separators == 2:  # "</s></s>": b is packed as "</s> b"
                b = tf.concat([tf.fill([b.nrows(), 1], self.sep_id), b], axis=1)
            segments = [_keep_first(a, keep_a), b]
        ids, type_ids = tf_text.combine_segments(
            segments, start_of_sequence_id=self.cls_id, end_of_segment_id=self.sep_id
        )
        word_ids, mask = tf_text.pad_model_inputs(ids, sequence_length, pad_value=self.pad_id)
        type_ids, _ = tf_text.pad_model_inputs(type_ids * self.second_type_id, sequence_length,
                                               pad_value=0)
        outputs = {
            "input_word_ids": tf.cast(word_ids, tf.int32),
            "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.cast(type_ids, tf.int32),
        }
        if unbatched:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs

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
