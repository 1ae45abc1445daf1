"""BERT pretraining task: masked LM + next-sentence (or sentence-order)."""

import keras
from keras import ops

from kerasbert.layers import MaskedLMHead
from kerasbert.layers import padding_mask_to_attention_bias
from kerasbert.layers import NextSentenceHead
from kerasbert.tasks.pretraining_task import PretrainingTask
from kerasbert.kernels import token_cross_entropy

OBJECTIVES = (("mlm", "nsp"), ("mlm", "sop"), ("mlm",))
BACKBONE_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
TERM_NAMES = (
    "mlm_loss_sum",
    "mlm_weight_sum",
    "mlm_correct_sum",
    "sentence_loss_sum",
    "sentence_count",
    "sentence_correct_sum",
)
_EPSILON = 1e-5
# Variables named like these get no weight decay (LayerNorm gamma/beta, biases).
NO_DECAY_NAMES = ("bias", "gamma", "beta")


def _validate_objectives(objectives):
    if isinstance(objectives, str):
        objectives = (objectives,)
    try:
        objectives = tuple(str(o).lower() for o in objectives)
    except TypeError:
        objectives = None
    if objectives not in OBJECTIVES:
        raise ValueError(
            "objectives must be one of "
            + ", ".join(repr(o) for o in OBJECTIVES)
            + f" (NSP: BERT, SOP: ALBERT, MLM only: RoBERTa); got {objectives!r}."
        )
    return objectives


def masked_lm_elementwise(head, outputs, ids, weights):
    """Per-prediction masked-LM values (float32 [B, P] each): "mlm_ce" the
    cross-entropy of `ids`, "mlm_hits" 1 where the id's logit is the
    largest, "mlm_weights" the prediction weights (0 = padding).

    Read from `outputs["mlm_hidden"]` through `head.cross_entropy` (which
    never builds the [B, P, V] logits, see `kernels.decoder_cross_entropy`)
    when present, else from `outputs["mlm_logits"]`."""
    ids = ops.cast(ids, "int32")
    if "mlm_hidden" in outputs:
        ce, hits = head.cross_entropy(outputs["mlm_hidden"], ids)
    else:
        ce, hits = token_cross_entropy(outputs["mlm_logits"], ids)
    return {"mlm_ce": ce, "mlm_hits": hits, "mlm_weights": ops.cast(weights, "float32")}


def _split_encoder(backbone):
    """(model giving the input of the last block, the last block) when the
    last layer can run at chosen positions only, else None: one block per
    layer (ALBERT with inner repetitions has several), at least two layers,
    full attention, the shared encoder graph's outputs."""
    blocks = list(getattr(backbone, "transformer_layers", None) or [])
    outputs = backbone.output if isinstance(backbone.output, dict) else {}
    encoder_outputs = outputs.get("encoder_outputs") or []
    if (len(blocks) < 2 or len(blocks) != len(encoder_outputs)
            or getattr(blocks[-1], "attention_type", None) != "full"
            or getattr(backbone, "causal", False)):
        return None
    prefix = keras.Model(backbone.input, encoder_outputs[-2], name="encoder_below_last_layer")
    return prefix, blocks[-1]


@keras.saving.register_keras_serializable(package="kerasbert")
class BertPretrainer(PretrainingTask):
    """A backbone with the BERT pretraining heads and their losses.

    The masked-LM head gathers `masked_lm_positions` and decodes with the
    backbone's token embedding (tied); the sentence head classifies
    `pooled_output` (NSP: label 1 = "B is a random sentence"; SOP: label 1 =
    "the two segments are swapped"; the same head serves both).

    Loss = sum(w * ce) / sum(w) over the masked positions (w =
    `masked_lm_weights`, so padded predictions count for nothing) + the mean
    sentence cross-entropy over the batch, + any regularisation losses.
    Under a `tf.distribute` strategy the denominators are summed over the
    replicas, so the gradient is that of the global-batch loss exactly.

    Train with `model.fit(kerasbert.data.pretraining_dataset(...))`: labels
    are read from the feature dict (no `y`, no `loss=` in `compile`).

    Args:
        backbone: a `kerasbert.models.Backbone` (BertBackbone, ...).
        objectives: ("mlm", "nsp") (BERT), ("mlm", "sop") (ALBERT) or
            ("mlm",) (RoBERTa: no sentence head).
        dtype: defaults to the backbone's dtype policy, so `compile` wraps
            the optimizer in a `LossScaleOptimizer` under mixed_float16.
        sparse_last_layer: compute the last encoder layer only where the
            heads read it: the masked positions (and the first token for
            the sentence head). Its keys and values still cover every
            position, so the logits equal the full computation's; the last
            layer's feed-forward, attention output and queries run on 1 + P
            rows instead of T (google-research/bert and keras-hub compute
            all T, then gather). Used when the backbone allows it: one block
            per layer, at least 2 layers, full attention; otherwise (and
            with False) the whole backbone runs.

    Call args:
        inputs: dict with `input_word_ids`, `input_mask`, `input_type_ids`
            (int32 [B, T]) and `masked_lm_positions` (int [B, P]); other keys
            (the labels) are ignored.

    Returns:
        dict, the same keys in training and inference: `mlm_logits`
        float32 [B, P, vocabulary_size], `mlm_hidden` [B, P, E] (the
        transformed vectors the loss decodes, `MaskedLMHead.cross_entropy`;
        a training step that does not read `mlm_logits` never computes
        them) and, with a sentence objective, `sentence_logits` float32
        [B, 2].

    Metrics (in `fit`/`evaluate` logs): `loss`, `mlm_loss`, `mlm_accuracy`
    (weighted by masked_lm_weights), and with a sentence objective
    `sentence_loss`, `sentence_accuracy`.

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import BertBackbone
    >>> from kerasbert.tasks import BertPretrainer
    >>> model = BertPretrainer(BertBackbone.from_preset("bert_tiny", vocabulary_size=10))
    >>> outputs = model({"input_word_ids": np.array([[2, 5, 4, 3, 6, 4, 3]]),     # [B, T]
    ...                  "input_mask": np.ones((1, 7), "int32"),
    ...                  "input_type_ids": np.array([[0, 0, 0, 0, 1, 1, 1]]),
    ...                  "masked_lm_positions": np.array([[2, 5]])})              # [B, P]
    >>> tuple(outputs["mlm_logits"].shape), tuple(outputs["sentence_logits"].shape)   # MLM, NSP
    ((1, 2, 10), (1, 2))
    """

    def __init__(self, backbone, objectives=("mlm", "nsp"), dtype=None,
                 sparse_last_layer=True, **kwargs):
        objectives = _validate_objectives(objectives)
        super().__init__(backbone, dtype=dtype, **kwargs)
        self.objectives = objectives
        self.sparse_last_layer = bool(sparse_last_layer)
        # Not tracked (object.__setattr__): the prefix model shares the
        # backbone's layers, whose weights the backbone already owns.
        object.__setattr__(self, "_split_encoder",
                           _split_encoder(backbone) if sparse_last_layer else None)
        self.sentence_objective = objectives[1] if len(objectives) > 1 else None

        hidden_dim = backbone.output_dim
        # Names as in kerasbert.convert.tf1_checkpoint.load_pretraining_heads.
        self.masked_lm_head = MaskedLMHead.tied_to(backbone, name="masked_lm_head")
        self.next_sentence_head = None
        if self.sentence_objective is not None:
            self.next_sentence_head = NextSentenceHead(
                num_classes=2,
                initializer_range=backbone.initializer_range,
                dtype=backbone.dtype_policy,
                name="next_sentence_head",
            )
            self.next_sentence_head.build((None, hidden_dim))

        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        self.mlm_accuracy = keras.metrics.Mean(name="mlm_accuracy")
        if self.sentence_objective is not None:
            self.sentence_loss_tracker = keras.metrics.Mean(name="sentence_loss")
            self.sentence_accuracy = keras.metrics.Mean(name="sentence_accuracy")
        self.built = True

    # --- forward ----------------------------------------------------------

    def call(self, inputs, training=False):
        features = {k: inputs[k] for k in BACKBONE_INPUTS if k in inputs}
        if "input_type_ids" not in features:
            features["input_type_ids"] = ops.zeros_like(inputs["input_word_ids"])
        if self._split_encoder is not None:
            return self._call_sparse(features, inputs["masked_lm_positions"], training)
        outputs = self.backbone(features, training=training)
        result = self._mlm_outputs(
            outputs["sequence_output"], inputs["masked_lm_positions"], training
        )
        if self.next_sentence_head is not None:
            result["sentence_logits"] = self.next_sentence_head(
                outputs["pooled_output"]
            )
        return result

    def _call_sparse(self, features, masked_positions, training):
        """The heads on the last layer computed at [first token, masked
        positions] only (see `sparse_last_layer`)."""
        prefix, last_block = self._split_encoder
        hidden = prefix(features, training=training)  # input of the last block
        positions = ops.cast(masked_positions, "int32")
        queries = ops.concatenate([ops.zeros_like(positions[:, :1]), positions], axis=1)
        top = last_block(
            hidden,
            attention_bias=padding_mask_to_attention_bias(features["input_mask"]),
            query_positions=queries,
            training=training,
        )  # [B, 1 + P, H]: row 0 is the first token, row 1 + i masked position i
        local = ops.zeros_like(positions) + ops.expand_dims(
            ops.arange(1, ops.shape(positions)[1] + 1, dtype="int32"), 0
        )
        result = self._mlm_outputs(top, local, training)
        if self.next_sentence_head is not None:
            pooler = self.backbone.pooler
            pooled = pooler(top) if pooler is not None else top[:, 0, :]
            result["sentence_logits"] = self.next_sentence_head(pooled)
        return result

    def _mlm_outputs(self, sequence_output, masked_positions, training):
        """{"mlm_logits": [B, P, V], "mlm_hidden": [B, P, E]}."""
        del training  # the head has no dropout
        hidden = self.masked_lm_head.hidden(sequence_output, masked_positions)
        return {"mlm_logits": self.masked_lm_head.logits(hidden), "mlm_hidden": hidden}

    # --- losses -----------------------------------------------------------

    def _elementwise(self, features, outputs):
        """Per-position / per-example float32 cross-entropy and hits."""
        out = masked_lm_elementwise(self.masked_lm_head, outputs, features["masked_lm_ids"],
                                    features["masked_lm_weights"])
        if self.next_sentence_head is not None:
            s_logits = ops.cast(outputs["sentence_logits"], "float32")
            labels = ops.reshape(
                ops.cast(features["next_sentence_labels"], "int32"), (-1,)
            )
            out["sentence_ce"] = keras.losses.sparse_categorical_crossentropy(
                labels, s_logits, from_logits=True
            )
            out["sentence_hits"] = ops.cast(
                ops.equal(ops.cast(ops.argmax(s_logits, axis=-1), "int32"), labels),
                "float32",
            )
        return out

    @staticmethod
    def _sums(elementwise):
        e = elementwise
        w = e["mlm_weights"]
        terms = {
            "mlm_loss_sum": ops.sum(w * e["mlm_ce"]),
            "mlm_weight_sum": ops.sum(w),
            "mlm_correct_sum": ops.sum(w * e["mlm_hits"]),
        }
        if "sentence_ce" in e:
            terms["sentence_loss_sum"] = ops.sum(e["sentence_ce"])
            terms["sentence_count"] = ops.cast(
                ops.shape(e["sentence_ce"])[0], "float32"
            )
            terms["sentence_correct_sum"] = ops.sum(e["sentence_hits"])
        else:
            zero = ops.zeros((), "float32")
            terms.update(
                sentence_loss_sum=zero, sentence_count=zero, sentence_correct_sum=zero
            )
        return {k: ops.cast(v, "float32") for k, v in terms.items()}

    def loss_terms(self, features, outputs):
        """Per-batch SUMS (float32 scalars) from which the loss and the
        accuracies follow: mlm_loss_sum, mlm_weight_sum, mlm_correct_sum,
        sentence_loss_sum, sentence_count, sentence_correct_sum (the
        sentence ones are 0 without a sentence objective).

        Sums all-reduce exactly across replicas; `combine_loss_terms` of the
        global sums is the global-batch loss."""
        return self._sums(self._elementwise(features, outputs))

    @staticmethod
    def loss_normalizers(features):
        """The loss's denominators, from the data alone (float32 scalars):
        mlm_weight_sum (real masked positions) and sentence_count (the
        batch size). The training loop sums them over micro-batches and
        replicas before the forward pass (kerasbert.training.loop)."""
        return {
            "mlm_weight_sum": ops.sum(ops.cast(features["masked_lm_weights"], "float32")),
            "sentence_count": ops.cast(ops.shape(features["input_word_ids"])[0], "float32"),
        }

    @staticmethod
    def combine_loss_terms(terms, normalizers=None):
        """Total loss from (possibly all-reduced) `loss_terms`:
        mlm_loss_sum / max(mlm_weight_sum, eps) + sentence_loss_sum /
        max(sentence_count, 1) (0 without a sentence objective).

        normalizers: the denominators (`loss_normalizers`, summed over the
            global batch); None takes them from `terms` itself."""
        n = terms if normalizers is None else normalizers
        mlm = terms["mlm_loss_sum"] / ops.maximum(n["mlm_weight_sum"], _EPSILON)
        sentence = terms["sentence_loss_sum"] / ops.maximum(n["sentence_count"], 1.0)
        return mlm + sentence

    #: Progress-bar label -> metric of `summarize_terms`.
    progress_metrics = {"loss": "loss", "mlm_acc": "mlm_accuracy"}

    @staticmethod
    def summarize_terms(sums):
        """Global per-step sums (numbers) -> {"loss", "mlm_loss",
        "mlm_accuracy"[, "sentence_loss", "sentence_accuracy"]} as floats."""
        w = max(float(sums["mlm_weight_sum"]), 1e-12)
        out = {"mlm_loss": float(sums["mlm_loss_sum"]) / w,
               "mlm_accuracy": float(sums["mlm_correct_sum"]) / w}
        n = float(sums["sentence_count"])
        if n > 0:
            out["sentence_loss"] = float(sums["sentence_loss_sum"]) / n
            out["sentence_accuracy"] = float(sums["sentence_correct_sum"]) / n
        out["loss"] = out["mlm_loss"] + out.get("sentence_loss", 0.0)
        return out

    def _update_metrics(self, e):
        self.mlm_loss_tracker.update_state(e["mlm_ce"], sample_weight=e["mlm_weights"])
        self.mlm_accuracy.update_state(e["mlm_hits"], sample_weight=e["mlm_weights"])
        if self.next_sentence_head is not None:
            self.sentence_loss_tracker.update_state(e["sentence_ce"])
            self.sentence_accuracy.update_state(e["sentence_hits"])

    # --- config -------------------------------------------------------------

    def get_config(self):
        return {**super().get_config(), "objectives": list(self.objectives),
                "sparse_last_layer": self.sparse_last_layer}
