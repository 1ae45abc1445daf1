"""Packs BPE ids into RoBERTa inputs: `<s> a </s>` or `<s> a </s></s> b </s>`."""

import tensorflow as tf

from kerasbert.text.packer import _as_ragged
from kerasbert.text.packer import _keep_first
from kerasbert.text.packer import pair_lengths


class RobertaPacker(tf.Module):
    """Makes `input_word_ids`, `input_mask`, `input_type_ids` from pieces.

    Layout (fairseq / Hugging Face RoBERTa): `<s> a </s>` or
    `<s> a </s></s> b </s>`, padded with `pad_id`. A pair spends four
    special tokens, so T - 4 pieces are left for `a` and `b`, cut
    longest-first as `BertPacker` does (the longer segment loses its last
    piece, `b` on a tie); a single segment keeps its first T - 2.
    `input_type_ids` is all zeros (RoBERTa has one segment type) and
    `input_mask` is 1 on real tokens.

    Args:
        seq_length: output length T (>= 4 for pairs, >= 2 for singles).
        start_id, end_id, pad_id: ids of `<s>`, `</s>`, `<pad>` (0, 2, 1 in
            RoBERTa; see `from_tokenizer`).

    Call args:
        a: int ids [B, (pieces)] (ragged or dense), [B, (words), (pieces)],
            or one example [pieces].
        b: optional second segment, same batch size.
        seq_length: optional T overriding the constructor's (Python int, or
            an int32 scalar tensor checked when the graph runs).

    Returns:
        dict of int32 tensors [B, T] (or [T] for one unbatched example).
    """

    def __init__(self, seq_length, start_id, end_id, pad_id, name=None):
        super().__init__(name=name)
        seq_length = int(seq_length)
        if seq_length < 2:
            raise ValueError(f"seq_length must be at least 2, got {seq_length}.")
        self.seq_length = seq_length
        self.start_id, self.end_id, self.pad_id = int(start_id), int(end_id), int(pad_id)

    @classmethod
    def from_tokenizer(cls, tokenizer, seq_length, **kwargs):
        """Takes the special ids from a `BytePairTokenizer`."""
        return cls(seq_length, tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id, **kwargs)

    @tf.autograph.experimental.do_not_convert
    def __call__(self, a, b=None, seq_length=None):
        import tensorflow_text as tf_text

        seq_length = self._checked_seq_length(seq_length, pair=b is not None)
        a, unbatched = _as_ragged(a)
        a = tf.cast(a, tf.int32)
        if b is None:
            budget = tf.cast(seq_length - 2, tf.int64)
            segments = [_keep_first(a, tf.fill([a.nrows()], budget))]
        else:
            b, _ = _as_ragged(b)
            b = tf.cast(b, tf.int32)
            keep_a, keep_b = pair_lengths(a.row_lengths(), b.row_lengths(), seq_length - 4)
            # "</s></s>" between the segments: b is packed as "</s> b".
            b = _keep_first(b, keep_b)
            b = tf.concat([tf.fill([b.nrows(), 1], self.end_id), b], axis=1)
            segments = [_keep_first(a, keep_a), b]
        ids, _ = tf_text.combine_segments(
            segments, start_of_sequence_id=self.start_id, end_of_segment_id=self.end_id
        )
        word_ids, mask = tf_text.pad_model_inputs(ids, seq_length, pad_value=self.pad_id)
        outputs = {
            "input_word_ids": tf.cast(word_ids, tf.int32),
            "input_mask": tf.cast(mask, tf.int32),
            "input_type_ids": tf.zeros_like(word_ids, tf.int32),
        }
        if unbatched:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs

    def _checked_seq_length(self, seq_length, pair):
        minimum, what = (4, "pairs") if pair else (2, "single segments")
        message = f"seq_length must be at least {minimum} for {what}"
        if seq_length is None:
            seq_length = self.seq_length
        if tf.is_tensor(seq_length):
            seq_length = tf.cast(seq_length, tf.int32)
            check = tf.debugging.assert_greater_equal(seq_length, minimum, message=message)
            with tf.control_dependencies([check]):
                return tf.identity(seq_length)
        seq_length = int(seq_length)
        if seq_length < minimum:
            raise ValueError(f"{message}, got {seq_length}.")
        return seq_length
