"""Causal language modelling: next-token loss, and text generation.

`CausalLM` puts a decoder on a causal backbone (`GptBackbone`, a causal
`ReformerBackbone`) and predicts token t + 1 from positions <= t: the tied
one (the transposed token embedding, no bias, as GPT-1), or its own
[V, output_dim] table and bias where the backbone says so
(`tied_lm_head`, the Reformer's). It trains with `kerasbert pretrain --preset gpt1 ...` (the
training-loop protocol of kerasbert.training.loop) and with `model.fit` on
`kerasbert.data.pretraining_dataset(..., masked_lm=False)` batches, and
generates with `generate` (greedy, top-k, top-p, temperature).
"""

import keras
from keras import ops

from kerasbert.decoding import SAMPLING_STRATEGIES
from kerasbert.decoding import check_sampling
from kerasbert.decoding import greedy_search
from kerasbert.decoding import sample_logits
from kerasbert.decoding import sampler
from kerasbert.kernels import decoder_cross_entropy
from kerasbert.kernels import decoder_logits
from kerasbert.kernels import token_cross_entropy
from kerasbert.layers.initializers import bert_initializer
from kerasbert.tasks.pretraining_task import PretrainingTask
from kerasbert.tasks.pretraining_task import cross_replica_sum
from kerasbert.tasks.pretraining_task import num_replicas

BACKBONE_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
STRATEGIES = SAMPLING_STRATEGIES
_EPSILON = 1e-5
# `generate`'s sampling helpers live with the decoding loop; these names
# stay importable from here.
__all__ = ["BACKBONE_INPUTS", "STRATEGIES", "CausalLM", "backbone_features", "check_sampling",
           "next_token_elementwise", "sample_logits"]


def backbone_features(inputs):
    """The three backbone inputs of a feature dict (int32); missing type ids
    become zeros, a missing mask all ones."""
    if "input_word_ids" not in inputs:
        raise ValueError(
            f"Missing input 'input_word_ids'; got keys {sorted(inputs)}."
        )
    ids = ops.cast(inputs["input_word_ids"], "int32")
    features = {"input_word_ids": ids}
    features["input_mask"] = (
        ops.cast(inputs["input_mask"], "int32")
        if "input_mask" in inputs
        else ops.ones_like(ids)
    )
    features["input_type_ids"] = (
        ops.cast(inputs["input_type_ids"], "int32")
        if "input_type_ids" in inputs
        else ops.zeros_like(ids)
    )
    return features


def next_token_elementwise(token_ids, padding_mask, decoder, hidden=None, logits=None,
                           bias=None):
    """Per-position next-token cross-entropy, hits and weights.

    Position t predicts token t + 1; a pair counts (weight 1) when both
    tokens are real (mask 1), so padding is never predicted and never
    predicts.

    Args:
        token_ids: int [B, T].
        padding_mask: int [B, T].
        decoder: the tied decoder (the backbone's `token_embedding`) or a
            [V, H] table.
        hidden: float [B, T, H] states to decode (the loss then never
            builds the [B, T, V] logits: `kernels.decoder_cross_entropy`);
            or, instead, `logits` float [B, T, V].
        bias: float [V] or None, the decoder's.

    Returns:
        dict of float32 [B, T - 1]: "ce", "hits", "weights".
    """
    token_ids = ops.cast(token_ids, "int32")
    mask = ops.cast(padding_mask, "float32")
    weights = mask[:, 1:] * mask[:, :-1]
    # Every position is scored, the last one of each row against the row's
    # first token (any valid id), and dropped after: slicing the [B, T]
    # results costs nothing, slicing the states or logits would copy them.
    targets = ops.concatenate([token_ids[:, 1:], token_ids[:, :1]], axis=1)
    if hidden is not None:
        ce, hits = decoder_cross_entropy(hidden, targets, decoder, bias)
    else:
        ce, hits = token_cross_entropy(logits, targets)
    return {"ce": ce[:, :-1], "hits": hits[:, :-1], "weights": weights}


@keras.saving.register_keras_serializable(package="kerasbert")
class CausalLM(PretrainingTask):
    """A causal backbone with a language-model head and the next-token loss.

    Tied (`backbone.tied_lm_head`, GPT): logits = sequence_output @
    token_embedding^T, no bias, so the task adds no weights (gpt1 +
    CausalLM has 116,534,784 parameters). Untied (the Reformer, whose
    sequence_output is 2 * hidden_dim wide): its own `lm_decoder` [V,
    output_dim] and `lm_bias` [V], the published checkpoints' `lm_head`.
    The loss is the mean next-token cross-entropy over real (token, next
    token) pairs. Under a `tf.distribute` strategy the denominator is
    summed over replicas, so gradients are those of the global batch.

    Data: pretraining TFRecords written with `--objective none
    --no-masking`, read WITHOUT masking (`needs_masked_lm` is False;
    `kerasbert pretrain` and `pretraining_dataset(masked_lm=False)` honour
    it). Sequences are `[CLS] text [SEP]` (`<s> text </s>` for byte-level
    BPE): the start token opens every sequence and the separator ends it.

    Args:
        backbone: a causal backbone (`backbone.causal`: GptBackbone, a
            causal ReformerBackbone). A bidirectional one would see the
            token it has to predict, so it is refused.
        dtype: defaults to the backbone's policy.

    Call args:
        inputs: dict with int [B, T] `input_word_ids` and `input_mask`
            (`input_type_ids` optional); other keys are ignored.

    Returns:
        dict, the same keys in training and inference: `logits` float32
        [B, T, vocabulary_size] (position t scores token t + 1) and `hidden`
        [B, T, output_dim], the states the loss decodes itself
        (`kernels.decoder_cross_entropy`, without building the logits).

    Metrics (`fit` logs): `loss`, `lm_loss`, `lm_accuracy`.

    Example:

    >>> from kerasbert.models import GptBackbone
    >>> from kerasbert.tasks import CausalLM
    >>> model = CausalLM(GptBackbone(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
    ...                              intermediate_dim=16, max_sequence_length=16))
    >>> len(model.generate([2, 5], max_new_tokens=3))        # greedy: 3 new token ids
    3
    >>> import numpy as np
    >>> ids = np.array([[2, 5, 6, 7]])                       # [B, T]
    >>> outputs = model({"input_word_ids": ids, "input_mask": np.ones_like(ids)})
    >>> tuple(outputs["logits"].shape)                       # [B, T, V]: token t + 1 at t
    (1, 4, 10)
    """

    #: Learning rate of `compile(optimizer="auto")` (GPT-1's).
    default_learning_rate = 2.5e-4

    #: The reader must not mask the input (kerasbert.training.pretrain).
    needs_masked_lm = False

    def __init__(self, backbone, dtype=None, **kwargs):
        if not getattr(backbone, "causal", False):
            raise ValueError(
                f"CausalLM needs a causal backbone (GptBackbone, ReformerBackbone with "
                f"causal=True); a {type(backbone).__name__} that attends to later tokens "
                "would see the tokens it must predict."
            )
        super().__init__(backbone, dtype=dtype, **kwargs)
        self.lm_decoder = self.lm_bias = None
        if not backbone.tied_lm_head:
            init = bert_initializer(backbone.initializer_range)
            self.lm_decoder = self.add_weight(
                shape=(backbone.vocabulary_size, backbone.output_dim), initializer=init,
                name="lm_decoder")
            self.lm_bias = self.add_weight(shape=(backbone.vocabulary_size,),
                                           initializer="zeros", name="lm_bias")
            # A published checkpoint's head, read with the backbone
            # (kerasbert.convert.hf_checkpoint).
            published = getattr(backbone, "published_lm_head", None)
            if published is not None:
                self.lm_decoder.assign(published[0])
                self.lm_bias.assign(published[1])
        self.lm_loss_tracker = keras.metrics.Mean(name="lm_loss")
        self.lm_accuracy = keras.metrics.Mean(name="lm_accuracy")
        self.built = True

    @property
    def decoder(self):
        """(table or tied embedding, bias or None) that decode the states."""
        if self.lm_decoder is None:
            return self.backbone.token_embedding, None
        return self.lm_decoder, self.lm_bias

    def logits(self, hidden):
        """float32 logits [..., V] of states [..., output_dim]."""
        table, bias = self.decoder
        return decoder_logits(hidden, table, bias)

    # --- forward ----------------------------------------------------------

    def call(self, inputs, training=False):
        sequence = self.backbone(backbone_features(inputs), training=training)["sequence_output"]
        # The loss decodes "hidden" itself (the faster layout); a training
        # step that does not read "logits" never computes them.
        return {"logits": self.logits(sequence), "hidden": sequence}

    # --- the training-loop protocol (kerasbert.training.loop) ----------------

    def _elementwise(self, features, outputs):
        table, bias = self.decoder
        return next_token_elementwise(features["input_word_ids"], features["input_mask"],
                                      table, hidden=outputs.get("hidden"),
                                      logits=outputs["logits"], bias=bias)

    def loss_terms(self, features, outputs):
        """Per-batch float32 sums: lm_loss_sum, lm_weight_sum (predicted
        tokens), lm_correct_sum."""
        e = self._elementwise(features, outputs)
        return {
            "lm_loss_sum": ops.sum(e["weights"] * e["ce"]),
            "lm_weight_sum": ops.sum(e["weights"]),
            "lm_correct_sum": ops.sum(e["weights"] * e["hits"]),
        }

    @staticmethod
    def loss_normalizers(features):
        """{"lm_weight_sum"}: the predicted tokens of the batch, from the
        mask alone (summed over micro-batches and replicas by the loop)."""
        mask = ops.cast(features["input_mask"], "float32")
        return {"lm_weight_sum": ops.sum(mask[:, 1:] * mask[:, :-1])}

    @staticmethod
    def combine_loss_terms(terms, normalizers=None):
        """lm_loss_sum / max(lm_weight_sum, eps), the weight sum taken from
        `normalizers` (global) when given, else from `terms`."""
        n = terms if normalizers is None else normalizers
        return terms["lm_loss_sum"] / ops.maximum(n["lm_weight_sum"], _EPSILON)

    #: Progress-bar label -> metric of `summarize_terms`.
    progress_metrics = {"loss": "loss", "lm_acc": "lm_accuracy"}

    @staticmethod
    def summarize_terms(sums):
        """Global step sums -> {"loss", "lm_loss", "lm_accuracy",
        "perplexity"} as floats."""
        import math

        w = max(float(sums["lm_weight_sum"]), 1e-12)
        loss = float(sums["lm_loss_sum"]) / w
        return {"loss": loss, "lm_loss": loss,
                "lm_accuracy": float(sums["lm_correct_sum"]) / w,
                "perplexity": math.exp(min(loss, 80.0))}

    # --- model.fit ----------------------------------------------------------

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Keras hook for `fit`/`evaluate`: the targets are the inputs
        shifted by one (no `y`); `sample_weight` is not used."""
        del y, sample_weight, training
        if y_pred is None:
            y_pred = self(x, training=False)
        features = backbone_features(x)
        e = self._elementwise(features, y_pred)
        terms = {"lm_loss_sum": ops.sum(e["weights"] * e["ce"]),
                 "lm_weight_sum": ops.sum(e["weights"])}
        global_weight = ops.stop_gradient(cross_replica_sum(terms["lm_weight_sum"]))
        loss = self.combine_loss_terms(terms, {"lm_weight_sum": global_weight})
        if self.losses:
            extra = ops.sum([ops.cast(ops.sum(v), "float32") for v in self.losses])
            loss = loss + extra / num_replicas()
        self.lm_loss_tracker.update_state(e["ce"], sample_weight=e["weights"])
        self.lm_accuracy.update_state(e["hits"], sample_weight=e["weights"])
        return loss

    # --- generation ---------------------------------------------------------

    def next_token_logits(self, token_ids, padding_mask, lengths):
        """float32 [B, V]: the logits at each row's last real token.

        Args:
            token_ids, padding_mask: int [B, L] (right-padded).
            lengths: int [B], real tokens per row (>= 1).
        """
        outputs = self.backbone(
            {"input_word_ids": token_ids, "input_mask": padding_mask,
             "input_type_ids": ops.zeros_like(token_ids)},
            training=False,
        )
        index = ops.reshape(ops.cast(lengths, "int32") - 1, (-1, 1, 1))
        last = ops.take_along_axis(outputs["sequence_output"], index, axis=1)
        return self.logits(last)[:, 0, :]

    def generate_ids(self, token_ids, lengths, max_new_tokens, end_token_id=None, pick=None):
        """Continues right-padded prompts in a fixed buffer (graph-safe).

        Each step runs the backbone on the whole buffer and reads the logits
        at each row's last token (causal attention makes what follows it
        irrelevant), then writes the chosen token after it. A row stops at
        `end_token_id` (never written), after `max_new_tokens` tokens, or
        when its prompt and completion fill the buffer's W positions.
        `kerasbert.decoding.greedy_search` is the loop, so this traces in a
        SavedModel's function (`serving/generation_serving.py`).

        Args:
            token_ids: int [B, W], each prompt left-aligned, W <= the
                backbone's positions.
            lengths: int [B], tokens per prompt, in [0, W] (an empty one,
                a served prompt of unknown pieces with no start token, sees
                a fully masked buffer at its first step).
            max_new_tokens: int or int32 scalar tensor >= 0.
            end_token_id: int or None.
            pick: `kerasbert.decoding.sampler`'s, or None (greedy).

        Returns:
            (int32 [B, max_new_tokens] the new tokens, left-aligned; int32
            [B] how many of them each row has, the end token not counted).
        """
        ids = ops.cast(token_ids, "int32")
        lengths = ops.cast(lengths, "int32")
        width = ops.shape(ids)[1]
        positions = ops.expand_dims(ops.arange(width, dtype="int32"), 0)

        def step(tokens, index, buffer):
            # The previous step's token goes after the row's last one (the
            # first step rewrites the prompt's last token in place); rows
            # that ended or filled the buffer are never read again.
            ids, filled = buffer
            ids = ops.where(positions == ops.expand_dims(filled, 1),
                            ops.expand_dims(tokens, 1), ids)
            filled = filled + 1
            mask = ops.cast(positions < ops.expand_dims(filled, 1), "int32")
            logits = self.next_token_logits(ids, mask, ops.minimum(filled, width))
            return logits, (ids, filled)

        last = ops.take_along_axis(ids, ops.expand_dims(ops.maximum(lengths - 1, 0), 1),
                                   axis=1)[:, 0]
        return greedy_search(step, last, (ids, lengths - 1), max_new_tokens, end_token_id,
                             pick=pick, limits=width - lengths)

    def generate(self, prompts, max_new_tokens=32, strategy="greedy", top_k=50, top_p=0.9,
                 temperature=1.0, seed=None, end_token_id=None):
        """Continues token-id prompts (`generate_ids` on a buffer of the
        longest prompt + `max_new_tokens` positions, at most the
        backbone's).

        Args:
            prompts: a list of ints (one prompt) or a list of such lists;
                each non-empty, shorter than `max_sequence_length`.
            max_new_tokens: int >= 1.
            strategy, top_k, top_p, temperature: see
                `kerasbert.decoding.sample_logits`.
            seed: int or None; the same seed gives the same samples.
            end_token_id: int or None; it ends a row and is not returned.

        Returns:
            the new tokens: a list of ints for one prompt, else a list of
            lists.
        """
        import numpy as np

        check_sampling(strategy, top_k, top_p, temperature)
        rows, single = self._prompt_rows(prompts, max_new_tokens)
        width = min(self.backbone.max_sequence_length,
                    max(map(len, rows)) + int(max_new_tokens))
        ids = np.zeros((len(rows), width), "int32")
        for i, row in enumerate(rows):
            ids[i, :len(row)] = row
        lengths = np.array([len(row) for row in rows], "int32")
        pick = sampler(strategy, int(max_new_tokens), len(rows), top_k, top_p, temperature,
                       seed)
        new, counts = self.generate_ids(ids, lengths, int(max_new_tokens), end_token_id, pick)
        new, counts = ops.convert_to_numpy(new), ops.convert_to_numpy(counts)
        out = [row[:n].tolist() for row, n in zip(new, counts)]
        return out[0] if single else out

    def _prompt_rows(self, prompts, max_new_tokens):
        """(list of token lists, whether one prompt was given); ValueError
        for an empty or too long prompt or a bad `max_new_tokens`."""
        import numpy as np

        single = len(prompts) > 0 and all(isinstance(t, (int, np.integer)) for t in prompts)
        rows = [list(prompts)] if single else [list(p) for p in prompts]
        limit = self.backbone.max_sequence_length
        if not rows or any(not row for row in rows):
            raise ValueError("Every prompt needs at least one token (e.g. the start token).")
        if any(len(row) >= limit for row in rows):
            raise ValueError(f"A prompt has {max(map(len, rows))} tokens; the model has "
                             f"{limit} positions, so at most {limit - 1} leave room to generate.")
        if int(max_new_tokens) < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens!r}.")
        return rows, single
