"""ELECTRA pretraining: a small generator fills in masked tokens, the
discriminator detects which tokens were replaced (Clark et al., 2020).

    masked input -> generator (ElectraBackbone sharing the discriminator's
    embeddings) -> masked-LM logits at the masked positions -> one token
    sampled per position (Gumbel-max, no gradient) -> the original sequence
    with the samples written in -> discriminator -> one "replaced?" logit per
    token.

    loss = mlm_weight * generator MLM loss + rtd_weight * RTD loss
         (1 and 50, as the paper)

A sampled token equal to the original counts as NOT replaced (the paper's
labels). Fine-tuning and export use the discriminator (`.backbone`).
"""

import keras
from keras import ops

from kerasbert.layers import MaskedLMHead
from kerasbert.layers.activations import get_activation
from kerasbert.layers.initializers import bert_initializer
from kerasbert.models import ElectraBackbone
from kerasbert.tasks.bert_pretrainer import BACKBONE_INPUTS
from kerasbert.tasks.pretraining_task import PretrainingTask
from kerasbert.tasks.bert_pretrainer import masked_lm_elementwise

_EPSILON = 1e-5
# Keeps log(0) out of the Gumbel noise (the original adds the same 1e-9).
_GUMBEL_EPSILON = 1e-9


def generator_config(discriminator, fraction=0.25, layers_fraction=1.0):
    """The generator config the original derives from the discriminator's
    (google-research/electra `get_generator_config`).

    hidden = round(fraction * H), layers = round(layers_fraction * L),
    intermediate = 4 * hidden, heads = max(1, hidden // 64) (64-wide heads,
    so ELECTRA-Small's 1/4 generator, hidden 64, has one head); the
    embedding width, vocabulary, positions, dropout and activation are the
    discriminator's (the embeddings are shared).

    Args:
        discriminator: an `ElectraBackbone`.
        fraction: float in (0, 1].
        layers_fraction: float in (0, 1].

    Returns:
        dict of `ElectraBackbone` arguments.
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"generator_fraction must be in (0, 1], got {fraction!r}.")
    if not 0.0 < layers_fraction <= 1.0:
        raise ValueError(f"layers_fraction must be in (0, 1], got {layers_fraction!r}.")
    hidden = max(1, int(round(discriminator.hidden_dim * fraction)))
    heads = max(1, hidden // 64)
    if hidden % heads:  # e.g. hidden 200: fall back to one head
        heads = 1
    return {
        "vocabulary_size": discriminator.vocabulary_size,
        "num_layers": max(1, int(round(discriminator.num_layers * layers_fraction))),
        "num_heads": heads,
        "hidden_dim": hidden,
        "intermediate_dim": 4 * hidden,
        "embedding_dim": discriminator.embedding_dim or discriminator.hidden_dim,
        "max_sequence_length": discriminator.max_sequence_length,
        "num_segments": discriminator.num_segments,
        "dropout": discriminator.dropout,
        "activation": discriminator.activation,
        "layer_norm_epsilon": discriminator.layer_norm_epsilon,
        "initializer_range": discriminator.initializer_range,
        # The same attention as the discriminator (full, or BigBird's).
        **{k: getattr(discriminator, k) for k in ("attention", "block_size",
                                                   "num_random_blocks")
           if hasattr(discriminator, k)},
    }


def replace_tokens(token_ids, masked_positions, original_ids, masked_weights, new_ids):
    """Writes `new_ids` at the masked positions of the ORIGINAL sequence.

    Args:
        token_ids: int [B, T], the masked input (its masked positions hold
            [MASK] / a random token / the original, BERT's 80/10/10).
        masked_positions: int [B, P].
        original_ids: int [B, P], the tokens that were masked.
        masked_weights: [B, P], 0 for padded predictions (never written).
        new_ids: int [B, P], the generator's samples.

    Returns:
        (corrupted int32 [B, T], replaced int32 [B, T]): `replaced` is 1 where
        a masked position now holds a token other than the original one.
    """
    token_ids = ops.cast(token_ids, "int32")
    positions = ops.cast(masked_positions, "int32")
    length = ops.shape(token_ids)[1]
    # [B, P, T]: prediction p writes position t. Integer max over P instead
    # of a scatter: exact, backend-neutral, and a repeated position cannot
    # add two ids together.
    writes = ops.logical_and(
        ops.equal(ops.expand_dims(positions, -1), ops.arange(length, dtype="int32")),
        ops.expand_dims(ops.cast(masked_weights, "float32") > 0, -1),
    )

    def scatter(values):  # [B, P] -> [B, T], -1 where nothing is written
        values = ops.expand_dims(ops.cast(values, "int32"), -1)
        return ops.max(ops.where(writes, values, -1), axis=1)

    at_original, at_new = scatter(original_ids), scatter(new_ids)
    written = at_original >= 0
    original = ops.where(written, at_original, token_ids)
    corrupted = ops.where(written, at_new, token_ids)
    replaced = ops.logical_and(written, ops.not_equal(corrupted, original))
    return corrupted, ops.cast(replaced, "int32")


def sample_from_logits(logits, seed_generator, temperature=1.0):
    """One token per row, drawn from softmax(logits / temperature) with the
    Gumbel-max trick (as the original): argmax(logits / T + G), G =
    -log(-log(U)). No gradient flows through the choice.

    Args:
        logits: float [..., V].
        seed_generator: a `keras.random.SeedGenerator`.
        temperature: float > 0.

    Returns:
        int32 [...].
    """
    logits = ops.stop_gradient(ops.cast(logits, "float32")) / temperature
    uniform = keras.random.uniform(ops.shape(logits), seed=seed_generator)
    gumbel = -ops.log(-ops.log(uniform + _GUMBEL_EPSILON) + _GUMBEL_EPSILON)
    return ops.cast(ops.argmax(logits + gumbel, axis=-1), "int32")


@keras.saving.register_keras_serializable(package="kerasbert")
class ReplacedTokenHead(keras.layers.Layer):
    """The discriminator's per-token "was this token replaced?" classifier,
    as the original: dense(H) + activation, then dense(1).

    Args:
        hidden_dim: int. Width of the inner dense (the discriminator's H).
        activation: str (`kerasbert.layers.activations`).
        initializer_range: float.

    Call args:
        sequence_output: float [B, T, H].

    Returns:
        float32 logits [B, T] (positive: "replaced").
    """

    def __init__(self, hidden_dim, activation="gelu", initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.activation = activation
        self.initializer_range = initializer_range
        init = bert_initializer(initializer_range)
        self.dense = keras.layers.Dense(
            hidden_dim, activation=get_activation(activation), kernel_initializer=init,
            dtype=self.dtype_policy, name="dense",
        )
        self.logits = keras.layers.Dense(
            1, kernel_initializer=init, dtype=self.dtype_policy, name="logits"
        )

    def build(self, sequence_shape):
        self.dense.build(sequence_shape)
        self.logits.build(tuple(sequence_shape[:-1]) + (self.hidden_dim,))
        self.built = True

    def call(self, sequence_output):
        return ops.cast(self.logits(self.dense(sequence_output))[..., 0], "float32")

    def compute_output_shape(self, sequence_shape):
        return tuple(sequence_shape[:-1])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_dim": self.hidden_dim,
                "activation": self.activation,
                "initializer_range": self.initializer_range,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="kerasbert")
class ElectraPretrainer(PretrainingTask):
    """ELECTRA's generator + discriminator with the replaced-token-detection
    objective.

    The generator is an `ElectraBackbone` of the discriminator's depth and
    `generator_fraction` of its width (`generator_config`) that shares the
    discriminator's token, position and segment tables and embedding
    LayerNorm, projecting them with its own dense layer. Its masked-LM head
    (`MaskedLMHead`: dense + GELU + LayerNorm, decoder tied to the shared
    token table, output bias) predicts the masked tokens; one token per
    masked position is sampled from its softmax (Gumbel-max, no gradient)
    and written into the ORIGINAL sequence. The discriminator
    (`self.backbone`) reads that sequence and `ReplacedTokenHead` scores
    every token; the sigmoid loss covers every real token (input_mask 1),
    padding none.

    Loss = mlm_weight * sum(w * ce) / sum(w) (w = masked_lm_weights) +
    rtd_weight * sum(m * bce) / sum(m) (m = input_mask). Under a
    `tf.distribute` strategy both denominators are summed over replicas.

    Train with `kerasbert pretrain --preset electra_small` (the training-loop
    protocol of kerasbert.training.loop) or with `model.fit` on
    `kerasbert.data.pretraining_dataset(...)` batches (labels come from the
    feature dict; no `loss=` in `compile`).

    Args:
        backbone: the discriminator, an `ElectraBackbone` that owns its
            embeddings.
        generator: None (build one from `generator_fraction`), a dict of
            `ElectraBackbone` arguments (a generator's `get_config()`), or an
            `ElectraBackbone` built with
            `shared_embeddings=backbone.embeddings`.
        generator_fraction: float in (0, 1], generator width / discriminator
            width when `generator` is None (ELECTRA-Small and -Large: 1/4,
            Base: 1/3).
        rtd_weight: float, the weight of the discriminator loss (50).
        mlm_weight: float, the weight of the generator loss (1).
        temperature: float > 0, sampling temperature (1).
        seed: int or None, seeds the sampling.
        dtype: defaults to the backbone's dtype policy.

    Call args:
        inputs: dict with `input_word_ids`, `input_mask`, `input_type_ids`
            (int [B, T]; the masked sequence), `masked_lm_positions`,
            `masked_lm_ids` and `masked_lm_weights` ([B, P]).

    Returns:
        dict: `mlm_logits` float32 [B, P, V] (the generator's), `rtd_logits`
        float32 [B, T], `rtd_labels` int32 [B, T] (1 = replaced),
        `corrupted_ids` int32 [B, T] (what the discriminator read) and
        `mlm_hidden` [B, P, E] (what the MLM loss decodes,
        `MaskedLMHead.cross_entropy`); the same keys in training and
        inference.

    Metrics (`fit` logs and `summarize_terms`): `loss`, `mlm_loss`,
    `mlm_accuracy` (the generator), `rtd_loss`, `rtd_accuracy` (over real
    tokens), `rtd_precision` and `rtd_recall` (on replaced tokens), and in
    `summarize_terms` also `replaced_rate` (the share of real tokens
    replaced: the base rate a constant "replaced" guess would get right).

    Example:

    >>> import numpy as np
    >>> from kerasbert import models, tasks
    >>> discriminator = models.ElectraBackbone(vocabulary_size=10, num_layers=1, num_heads=2,
    ...                                        hidden_dim=8, intermediate_dim=16)
    >>> model = tasks.ElectraPretrainer(discriminator, generator_fraction=0.5, seed=0)
    >>> outputs = model({"input_word_ids": np.array([[2, 5, 4, 7, 3]]),           # [B, T]
    ...                  "input_mask": np.ones((1, 5), "int32"),
    ...                  "input_type_ids": np.zeros((1, 5), "int32"),
    ...                  "masked_lm_positions": np.array([[2]]),                  # [B, P]
    ...                  "masked_lm_ids": np.array([[6]]),
    ...                  "masked_lm_weights": np.ones((1, 1), "float32")})
    >>> tuple(outputs["mlm_logits"].shape), tuple(outputs["rtd_logits"].shape)
    ((1, 1, 10), (1, 5))
    """

    default_learning_rate = 5e-4  # ELECTRA-Small's

    def __init__(self, backbone, generator=None, generator_fraction=0.25, rtd_weight=50.0,
                 mlm_weight=1.0, temperature=1.0, seed=None, dtype=None, **kwargs):
        if not isinstance(backbone, ElectraBackbone):
            raise ValueError(
                "ElectraPretrainer needs an ElectraBackbone discriminator, got "
                f"{type(backbone).__name__}; build one with "
                "kerasbert.models.from_preset('electra_small', ...)."
            )
        if backbone.shares_embeddings:
            raise ValueError(
                "The discriminator must own its embeddings; this ElectraBackbone "
                "shares another one's (it is a generator)."
            )
        if not float(temperature) > 0.0:
            raise ValueError(f"temperature must be > 0, got {temperature!r}.")
        if float(rtd_weight) < 0 or float(mlm_weight) < 0:
            raise ValueError(
                f"rtd_weight ({rtd_weight}) and mlm_weight ({mlm_weight}) must be >= 0."
            )
        super().__init__(backbone, dtype=dtype, **kwargs)
        self.generator_fraction = float(generator_fraction)
        self.rtd_weight = float(rtd_weight)
        self.mlm_weight = float(mlm_weight)
        self.temperature = float(temperature)
        self.seed = seed

        if isinstance(generator, ElectraBackbone):
            if generator.embeddings is not backbone.embeddings:
                raise ValueError(
                    "The generator must share the discriminator's embeddings: build "
                    "it with ElectraBackbone(..., shared_embeddings="
                    "discriminator.embeddings), or pass its config as a dict."
                )
            self.generator = generator
        else:
            if generator is None:
                config = generator_config(backbone, self.generator_fraction)
                config.update(name="generator", dtype=backbone.dtype_policy)
            elif isinstance(generator, dict):
                config = dict(generator)
            else:
                raise TypeError(
                    "generator must be None, a dict of ElectraBackbone arguments or "
                    f"an ElectraBackbone; got {type(generator).__name__}."
                )
            self.generator = ElectraBackbone.from_config(
                {**config, "shared_embeddings": backbone.embeddings}
            )

        # The generator shares the discriminator's embeddings (checked above).
        self.generator_lm_head = MaskedLMHead.tied_to(
            self.generator, name="generator_masked_lm_head", dtype=backbone.dtype_policy)
        self.rtd_head = ReplacedTokenHead(
            backbone.hidden_dim,
            activation=backbone.activation,
            initializer_range=backbone.initializer_range,
            dtype=backbone.dtype_policy,
            name="discriminator_head",
        )
        self.rtd_head.build((None, None, backbone.hidden_dim))
        self.seed_generator = keras.random.SeedGenerator(seed, name="sampling_seed")

        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        self.mlm_accuracy = keras.metrics.Mean(name="mlm_accuracy")
        self.rtd_loss_tracker = keras.metrics.Mean(name="rtd_loss")
        self.rtd_accuracy = keras.metrics.Mean(name="rtd_accuracy")
        self.rtd_precision = keras.metrics.Mean(name="rtd_precision")
        self.rtd_recall = keras.metrics.Mean(name="rtd_recall")
        self.built = True

    # --- forward ----------------------------------------------------------

    def call(self, inputs, training=False):
        missing = [k for k in ("input_word_ids", "masked_lm_positions", "masked_lm_ids",
                               "masked_lm_weights") if k not in inputs]
        if missing:
            raise ValueError(
                f"ElectraPretrainer inputs lack {', '.join(missing)}: the discriminator "
                "reads the original tokens with the generator's samples written at the "
                "masked positions, so it needs the masked positions, ids and weights."
            )
        ids = ops.cast(inputs["input_word_ids"], "int32")
        features = {k: ops.cast(inputs[k], "int32") for k in BACKBONE_INPUTS if k in inputs}
        features.setdefault("input_mask", ops.ones_like(ids))
        features.setdefault("input_type_ids", ops.zeros_like(ids))

        generated = self.generator(features, training=training)
        positions = inputs["masked_lm_positions"]
        # The sampling reads the generator's logits; the loss decodes
        # `mlm_hidden` itself (MaskedLMHead.cross_entropy, the faster
        # layout), so only the forward product is shared work.
        mlm_hidden = self.generator_lm_head.hidden(generated["sequence_output"], positions)
        mlm_logits = self.generator_lm_head.logits(mlm_hidden)
        sampled = sample_from_logits(mlm_logits, self.seed_generator, self.temperature)
        corrupted, replaced = replace_tokens(
            ids, inputs["masked_lm_positions"], inputs["masked_lm_ids"],
            inputs["masked_lm_weights"], sampled,
        )
        discriminated = self.backbone(
            {**features, "input_word_ids": corrupted}, training=training
        )
        return dict(
            mlm_logits=mlm_logits,
            mlm_hidden=mlm_hidden,
            rtd_logits=self.rtd_head(discriminated["sequence_output"]),
            rtd_labels=replaced,
            corrupted_ids=corrupted,
        )

    # --- the training-loop protocol (kerasbert.training.loop) ----------------

    def _elementwise(self, features, outputs):
        """Per-prediction MLM values ([B, P]) and per-token RTD values
        ([B, T]: bce, hits, predicted, labels, weights), float32."""
        out = masked_lm_elementwise(self.generator_lm_head, outputs, features["masked_lm_ids"],
                                    features["masked_lm_weights"])
        logits = ops.cast(outputs["rtd_logits"], "float32")
        labels = ops.cast(outputs["rtd_labels"], "float32")
        # Numerically stable sigmoid cross-entropy with logits.
        bce = (ops.maximum(logits, 0.0) - logits * labels
               + ops.log1p(ops.exp(-ops.abs(logits))))
        predicted = ops.cast(logits > 0.0, "float32")
        out.update(
            rtd_bce=bce,
            rtd_hits=ops.cast(ops.equal(predicted, labels), "float32"),
            rtd_predicted=predicted,
            rtd_labels=labels,
            rtd_weights=ops.cast(features["input_mask"], "float32"),
        )
        return out

    @staticmethod
    def _sums(e):
        w, m = e["mlm_weights"], e["rtd_weights"]
        terms = {
            "mlm_loss_sum": ops.sum(w * e["mlm_ce"]),
            "mlm_weight_sum": ops.sum(w),
            "mlm_correct_sum": ops.sum(w * e["mlm_hits"]),
            "rtd_loss_sum": ops.sum(m * e["rtd_bce"]),
            "rtd_weight_sum": ops.sum(m),
            "rtd_correct_sum": ops.sum(m * e["rtd_hits"]),
            "rtd_replaced_sum": ops.sum(m * e["rtd_labels"]),
            "rtd_predicted_sum": ops.sum(m * e["rtd_predicted"]),
            "rtd_true_positive_sum": ops.sum(m * e["rtd_predicted"] * e["rtd_labels"]),
        }
        return {k: ops.cast(v, "float32") for k, v in terms.items()}

    def loss_terms(self, features, outputs):
        """Per-batch float32 SUMS: mlm_loss_sum, mlm_weight_sum,
        mlm_correct_sum (generator, over masked positions); rtd_loss_sum,
        rtd_weight_sum (real tokens), rtd_correct_sum, rtd_replaced_sum,
        rtd_predicted_sum, rtd_true_positive_sum (discriminator). Sums
        all-reduce exactly across replicas and micro-batches."""
        return self._sums(self._elementwise(features, outputs))

    @staticmethod
    def loss_normalizers(features):
        """{"mlm_weight_sum": real masked positions, "rtd_weight_sum": real
        tokens}, from the data alone (the loop sums them over micro-batches
        and replicas before the forward pass)."""
        return {
            "mlm_weight_sum": ops.sum(ops.cast(features["masked_lm_weights"], "float32")),
            "rtd_weight_sum": ops.sum(ops.cast(features["input_mask"], "float32")),
        }

    def combine_loss_terms(self, terms, normalizers=None):
        """mlm_weight * mlm_loss_sum / mlm_weight_sum + rtd_weight *
        rtd_loss_sum / rtd_weight_sum, the denominators taken from
        `normalizers` (global) when given, else from `terms`."""
        n = terms if normalizers is None else normalizers
        mlm = terms["mlm_loss_sum"] / ops.maximum(n["mlm_weight_sum"], _EPSILON)
        rtd = terms["rtd_loss_sum"] / ops.maximum(n["rtd_weight_sum"], _EPSILON)
        return self.mlm_weight * mlm + self.rtd_weight * rtd

    #: Progress-bar label -> metric of `summarize_terms`.
    progress_metrics = {"loss": "loss", "mlm_acc": "mlm_accuracy",
                        "rtd_acc": "rtd_accuracy", "rtd_rec": "rtd_recall"}

    def summarize_terms(self, sums):
        """Global step sums -> floats: loss, mlm_loss, mlm_accuracy,
        rtd_loss, rtd_accuracy, rtd_precision (replaced among the tokens
        flagged; 0 when none is flagged), rtd_recall (flagged among the
        replaced; 0 when none was replaced), replaced_rate."""
        def ratio(num, den):
            den = float(sums[den])
            return float(sums[num]) / den if den > 0 else 0.0

        out = {
            "mlm_loss": ratio("mlm_loss_sum", "mlm_weight_sum"),
            "mlm_accuracy": ratio("mlm_correct_sum", "mlm_weight_sum"),
            "rtd_loss": ratio("rtd_loss_sum", "rtd_weight_sum"),
            "rtd_accuracy": ratio("rtd_correct_sum", "rtd_weight_sum"),
            "rtd_precision": ratio("rtd_true_positive_sum", "rtd_predicted_sum"),
            "rtd_recall": ratio("rtd_true_positive_sum", "rtd_replaced_sum"),
            "replaced_rate": ratio("rtd_replaced_sum", "rtd_weight_sum"),
        }
        out["loss"] = self.mlm_weight * out["mlm_loss"] + self.rtd_weight * out["rtd_loss"]
        return out

    # --- model.fit ----------------------------------------------------------

    def _update_metrics(self, e):
        w, m = e["mlm_weights"], e["rtd_weights"]
        self.mlm_loss_tracker.update_state(e["mlm_ce"], sample_weight=w)
        self.mlm_accuracy.update_state(e["mlm_hits"], sample_weight=w)
        self.rtd_loss_tracker.update_state(e["rtd_bce"], sample_weight=m)
        self.rtd_accuracy.update_state(e["rtd_hits"], sample_weight=m)
        # Precision: hits among flagged tokens; recall: among replaced ones.
        self.rtd_precision.update_state(e["rtd_hits"], sample_weight=m * e["rtd_predicted"])
        self.rtd_recall.update_state(e["rtd_hits"], sample_weight=m * e["rtd_labels"])

    # --- config -------------------------------------------------------------

    def get_config(self):
        return {
            **super().get_config(),
            "generator": self.generator.get_config(),
            "generator_fraction": self.generator_fraction,
            "rtd_weight": self.rtd_weight,
            "mlm_weight": self.mlm_weight,
            "temperature": self.temperature,
            "seed": self.seed,
        }
