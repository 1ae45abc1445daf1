"""In-graph masked-LM masking (dynamic masking, RoBERTa style).

`DynamicMasker` draws the BERT masks inside TensorFlow, so tf.data can give
every epoch new masks instead of the ones stored in the TFRecords. The rule is
the original one (DESIGN §4):

- never choose [CLS], [SEP] or [PAD] (nor any position with input_mask 0);
- per sequence choose num_to_predict = min(max_predictions_per_seq,
  max(1, round(n * masked_lm_prob))) positions uniformly among the maskable
  ones (n = the number of maskable tokens by default; `rate_basis="tokens"`
  counts every real token, [CLS]/[SEP] included, exactly as the original
  `create_pretraining_data.py` does); `round` is half-to-even like Python 3;
- of the chosen: 80% -> [MASK], 10% -> a random id in [0, vocab_size) (the
  original also draws from the whole vocabulary), 10% unchanged;
- positions are sorted ascending and 0-padded to max_predictions_per_seq,
  weights 1.0 for real predictions and 0.0 for padding;
- whole-word masking (`continuation_ids` / `from_vocab_file(...,
  whole_word_mask=True)`): a word is a piece plus the "##" pieces after it;
  words are visited in random order and taken whole while they fit in
  num_to_predict (a word that does not fit is skipped), as in the original;
  the 80/10/10 choice stays per token.

keras-hub's `MaskedLMMaskGenerator` is not reused: it selects through
tensorflow-text's `RandomItemSelector`, which rounds the count UP
(ceil(n * rate)) and has no max(1, .) floor, so its counts differ from the
rule above.

Randomness is stateless: the caller passes a `seed` ([2] int tensor) and the
same seed gives the same masks, so a deterministic pipeline can reproduce
them while a per-batch seed stream gives new masks every epoch.
"""

import tensorflow as tf

from kerasbert.text.tokenizer_paths import read_vocabulary
from kerasbert.text.families import special_ids
from kerasbert.text.families import word_starts

class DynamicMasker:
    """Draws masked-LM masks in-graph.

    Args:
        vocab_size: random replacement ids are drawn from [0, vocab_size).
        mask_id: id of [MASK].
        special_ids: ids never chosen ([CLS], [SEP], [PAD]).
        max_predictions_per_seq: P, the padded number of predictions.
        masked_lm_prob, mask_token_rate, random_token_rate: the 15% and
            80/10/10 rule.
        rate_basis: "maskable" (n = maskable tokens) or "tokens"
            (n = input_mask sum, the original creator's len(tokens)).

    Example:

    >>> import numpy as np
    >>> from kerasbert.data import DynamicMasker
    >>> masker = DynamicMasker(vocab_size=10, mask_id=4, special_ids=[2, 3, 0],  # CLS SEP PAD
    ...                        max_predictions_per_seq=2)
    >>> features = masker(np.array([[2, 5, 6, 7, 8, 3, 0, 0]]),    # input_ids [B, T]
    ...                   np.array([[1, 1, 1, 1, 1, 1, 0, 0]]),    # input_mask [B, T]
    ...                   seed=[1, 2])                             # same seed, same masks
    >>> {name: tuple(value.shape) for name, value in sorted(features.items())}
    {'input_word_ids': (1, 8), 'masked_lm_ids': (1, 2),
     'masked_lm_positions': (1, 2), 'masked_lm_weights': (1, 2)}
    >>> features["masked_lm_weights"].numpy().tolist()       # round(15% of 4) = 1 prediction
    [[1.0, 0.0]]
    """

    def __init__(
        self,
        *,
        vocab_size,
        mask_id,
        special_ids,
        max_predictions_per_seq,
        masked_lm_prob=0.15,
        mask_token_rate=0.8,
        random_token_rate=0.1,
        rate_basis="maskable",
        continuation_ids=None,
    ):
        if rate_basis not in ("maskable", "tokens"):
            raise ValueError(
                f"rate_basis must be 'maskable' or 'tokens', got {rate_basis!r}."
            )
        if not 0.0 < masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must be in (0, 1], got {masked_lm_prob}.")
        if mask_token_rate + random_token_rate > 1.0:
            raise ValueError("mask_token_rate + random_token_rate must be <= 1.")
        self.vocab_size = int(vocab_size)
        self.mask_id = int(mask_id)
        self.special_ids = sorted({int(i) for i in special_ids})
        self.max_predictions_per_seq = int(max_predictions_per_seq)
        self.masked_lm_prob = float(masked_lm_prob)
        self.mask_token_rate = float(mask_token_rate)
        self.random_token_rate = float(random_token_rate)
        self.rate_basis = rate_basis
        # Whole-word masking when given: ids of "##" pieces, which belong
        # to the word before them.
        self.continuation_ids = (
            None if continuation_ids is None else sorted({int(i) for i in continuation_ids})
        )

    def _choose_tokens(self, maskable, num, batch, sequence_length, seed):
        """Uniform choice of num[b] maskable positions without replacement:
        the highest random scores (non-maskable ones score -1). Returns
        [B, P] ascending positions, sequence_length where unused."""
        num_predictions = self.max_predictions_per_seq
        scores = tf.random.stateless_uniform([batch, sequence_length], seed)
        scores = tf.where(maskable, scores, -1.0)
        k = min(num_predictions, sequence_length)
        _, top = tf.math.top_k(scores, k=k, sorted=True)
        chosen = tf.range(k)[tf.newaxis] < num[:, tf.newaxis]
        return _padded_sorted(tf.where(chosen, top, sequence_length), num_predictions, sequence_length)

    def _choose_words(self, ids, maskable, num, batch, sequence_length, seed):
        """Whole-word choice as in the original: words (a piece plus the
        "##" pieces after it) in random order, each taken whole when it
        still fits in num[b], else skipped. Returns [B, P] as above."""
        continuation = tf.reduce_any(
            ids[..., tf.newaxis] == tf.constant(self.continuation_ids or [-1], tf.int32),
            axis=-1)
        previous = tf.pad(maskable, [[0, 0], [1, 0]])[:, :-1]
        starts = maskable & ~(continuation & previous)
        word = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1  # [B, T] word of token
        word = tf.where(maskable, word, sequence_length)  # non-maskable -> no word
        num_words = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1)
        rows = tf.range(batch)[:, tf.newaxis] * (sequence_length + 1)
        lengths = tf.math.unsorted_segment_sum(
            tf.ones([batch * sequence_length], tf.int32), tf.reshape(word + rows, [-1]),
            batch * (sequence_length + 1))
        lengths = tf.reshape(lengths, [batch, sequence_length + 1])[:, :sequence_length]  # [B, W]
        exists = tf.range(sequence_length)[tf.newaxis] < num_words[:, tf.newaxis]
        scores = tf.where(exists, tf.random.stateless_uniform([batch, sequence_length], seed), -1.0)
        order = tf.argsort(scores, axis=1, direction="DESCENDING")
        ordered_len = tf.gather(lengths, order, batch_dims=1)
        ordered_exists = tf.gather(exists, order, batch_dims=1)

        def take(total, column):
            length, real = column
            fits = real & (total + length <= num)
            return total + tf.where(fits, length, 0), fits

        _, taken = tf.scan(
            lambda state, column: take(state[0], column),
            (tf.transpose(ordered_len), tf.transpose(ordered_exists)),
            initializer=(tf.zeros([batch], tf.int32), tf.zeros([batch], tf.bool)))
        taken = tf.transpose(taken)  # [B, W] in random order
        # Back to word order, then to tokens.
        inverse = tf.argsort(order, axis=1)
        word_taken = tf.gather(taken, inverse, batch_dims=1)
        word_taken = tf.pad(word_taken, [[0, 0], [0, 1]])  # index sequence_length = no word
        token_taken = tf.gather(word_taken, word, batch_dims=1)
        token_positions = tf.where(token_taken, tf.range(sequence_length)[tf.newaxis], sequence_length)
        return _padded_sorted(token_positions, self.max_predictions_per_seq, sequence_length)

    @classmethod
    def from_vocab_file(cls, vocab_file, max_predictions_per_seq, *,
                        whole_word_mask=False, **kwargs):
        """A masker for any tokenizer's files (`--vocab`: vocab.txt, a
        SentencePiece `.model`, a BPE directory): the family's start,
        separator, padding and mask tokens are looked up by string
        ([CLS] [SEP] [PAD] [MASK]; <pad> for ALBERT; <s> </s> <pad> <mask>
        for RoBERTa). `whole_word_mask`: a word is a word-initial piece plus
        the pieces after it that do not begin a word ("##x"; no "▁" / "Ġ")."""
        kind, files, tokens = read_vocabulary(vocab_file)
        try:
            ids = special_ids(kind, tokens, files[0])
        except ValueError as error:
            raise ValueError(f"Dynamic masking: {error}") from None
        if whole_word_mask:
            kwargs["continuation_ids"] = [
                i for i, start in enumerate(word_starts(kind, tokens)) if not start]
        return cls(
            vocab_size=len(tokens),
            mask_id=ids["mask_id"],
            special_ids=[ids["cls_id"], ids["sep_id"], ids["pad_id"]],
            max_predictions_per_seq=max_predictions_per_seq,
            **kwargs,
        )

    def _num_to_predict(self, real, maskable):
        """[B] count of each row's predictions: min(P, max(1,
        round(n * masked_lm_prob))), never more than the maskable tokens."""
        n_maskable = tf.reduce_sum(tf.cast(maskable, tf.int32), axis=1)
        basis = n_maskable if self.rate_basis == "maskable" else (
            tf.reduce_sum(tf.cast(real, tf.int32), axis=1)
        )
        # tf.round is half-to-even, as Python 3's round in the original.
        num = tf.cast(tf.round(tf.cast(basis, tf.float32) * self.masked_lm_prob), tf.int32)
        num = tf.minimum(tf.maximum(num, 1), self.max_predictions_per_seq)
        return tf.minimum(num, n_maskable)  # nothing to choose in an all-special row

    def _replacements(self, original, rule_seed, token_seed):
        """The 80/10/10 rule on [B, P] original ids: [MASK], a random id or
        the id itself, per prediction."""
        shape = tf.shape(original)
        draw = tf.random.stateless_uniform(shape, rule_seed)
        random_tokens = tf.random.stateless_uniform(
            shape, token_seed, minval=0, maxval=self.vocab_size, dtype=tf.int32,
        )
        return tf.where(
            draw < self.mask_token_rate,
            self.mask_id,
            tf.where(draw < self.mask_token_rate + self.random_token_rate,
                     random_tokens, original),
        )

    def __call__(self, input_ids, input_mask, seed):
        """Masks a batch.

        Args:
            input_ids: int [B, T] (or [T]) unmasked token ids.
            input_mask: int/bool [B, T] (or [T]), 1 for real tokens.
            seed: int32/int64 [2] stateless seed.

        Returns:
            dict, leading [B] dropped again for [T] inputs:
            `input_word_ids` int32 [B, T] (masked), `masked_lm_positions`
            int32 [B, P], `masked_lm_ids` int32 [B, P] (the original ids),
            `masked_lm_weights` float32 [B, P].
        """
        ids = tf.cast(tf.convert_to_tensor(input_ids), tf.int32)
        single = ids.shape.rank == 1
        if single:
            ids = ids[tf.newaxis]
            input_mask = tf.convert_to_tensor(input_mask)[tf.newaxis]
        real = tf.cast(input_mask, tf.bool)
        sequence_length = ids.shape[1]
        if sequence_length is None:
            raise ValueError("DynamicMasker needs a static sequence length.")
        seed = tf.cast(tf.convert_to_tensor(seed), tf.int64)
        select_seed, rule_seed, token_seed = tf.unstack(
            tf.random.experimental.stateless_split(seed, 3)
        )
        special = tf.reduce_any(
            ids[..., tf.newaxis] == tf.constant(self.special_ids, tf.int32), axis=-1
        )
        maskable = real & ~special
        num = self._num_to_predict(real, maskable)
        batch = tf.shape(ids)[0]
        if self.continuation_ids is None:
            positions = self._choose_tokens(maskable, num, batch, sequence_length, select_seed)
        else:
            positions = self._choose_words(ids, maskable, num, batch, sequence_length, select_seed)
        valid = positions < sequence_length
        positions = tf.where(valid, positions, 0)
        original = tf.where(valid, tf.gather(ids, positions, batch_dims=1), 0)
        replacement = self._replacements(original, rule_seed, token_seed)
        out = {
            "input_word_ids": _put_at_positions(ids, positions, replacement, valid),
            "masked_lm_positions": positions,
            "masked_lm_ids": original,
            "masked_lm_weights": tf.cast(valid, tf.float32),
        }
        if single:
            out = {name: value[0] for name, value in out.items()}
        return out


def _put_at_positions(ids, positions, values, where):
    """`ids` [B, T] with values[b, p] written at positions[b, p] wherever
    where[b, p] ([B, P] each); the other slots leave `ids` as is."""
    slots = tf.where(where)  # [K, 2] (row, slot) of the slots to write
    at = tf.stack(
        [slots[:, 0], tf.cast(tf.gather_nd(positions, slots), tf.int64)], axis=1
    )
    return tf.tensor_scatter_nd_update(ids, at, tf.gather_nd(values, slots))


def _padded_sorted(chosen_positions, num_predictions, sequence_length):
    """[B, k] positions (sequence_length = none) -> ascending [B, P], sequence_length-padded."""
    positions = tf.sort(chosen_positions, axis=1)
    k = positions.shape[1]
    if k < num_predictions:
        positions = tf.pad(positions, [[0, 0], [0, num_predictions - k]],
                           constant_values=sequence_length)
    return positions[:, :num_predictions]


def restore_original_ids(input_ids, masked_lm_positions, masked_lm_ids, masked_lm_weights):
    """Undoes stored (static) masking: puts masked_lm_ids back at their
    positions where the weight is > 0. Shapes [B, T], [B, P], [B, P], [B, P];
    returns int32 [B, T]. Used to re-mask statically masked files."""
    return _put_at_positions(tf.cast(input_ids, tf.int32), masked_lm_positions,
                             tf.cast(masked_lm_ids, tf.int32), masked_lm_weights > 0)
