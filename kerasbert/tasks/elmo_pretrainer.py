"""ELMo's pretraining objective (Peters et al. 2018, eq. 1 of section 3.1):
a forward and a backward language model over a word vocabulary, sharing
the biLM's character encoder and one softmax."""

import keras
from keras import ops

from kerasbert.kernels import decoder_cross_entropy
from kerasbert.tasks.pretraining_task import PretrainingTask
from kerasbert.tasks.pretraining_task import cross_replica_sum
from kerasbert.tasks.pretraining_task import num_replicas

_EPSILON = 1e-5
#: A logit no sampled class beats (an accidental hit of the true word).
_NEVER = -1e4


def lm_targets(word_ids, mask, bos_id, eos_id):
    """The words each direction predicts.

    Args:
        word_ids: int [B, W], each row's words (right padding).
        mask: int [B, W].

    Returns:
        (forward, backward) int32 [B, W]: at word k the forward LM predicts
        word k + 1 (the last word: </S>), the backward LM word k - 1 (the
        first word: <S>), as the published biLM's <S> w_1 ... w_n </S>
        sequences do; anything at padding.
    """
    ids = ops.cast(word_ids, "int32")
    mask = ops.cast(mask, "int32")
    steps = ops.cumsum(ops.ones_like(mask), axis=1) - 1
    last = ops.sum(mask, axis=1, keepdims=True) - 1
    zero = ops.zeros_like(ids[:, :1])
    forward = ops.concatenate([ids[:, 1:], zero], axis=1)
    forward = ops.where(ops.equal(steps, last), eos_id, forward)
    backward = ops.concatenate([zero, ids[:, :-1]], axis=1)
    backward = ops.where(ops.equal(steps, 0), bos_id, backward)
    return forward, backward


def sampled_cross_entropy(x, labels, table, bias, num_sampled, seed):
    """Cross-entropy of `labels` against themselves and `num_sampled` words
    drawn uniformly (shared by the batch; a draw equal to a row's label is
    masked out), the sampled softmax of Jean et al. 2015 with a uniform
    proposal (its log-probability correction is the same for every class,
    so it cancels). The published biLM drew from a log-uniform proposal
    over a frequency-sorted vocabulary.

    Args:
        x: float [..., E]; labels: int [...]; table: [V, E]; bias: [V].

    Returns:
        float32 [...].
    """
    shape = ops.shape(labels)
    x = ops.cast(ops.reshape(x, (-1, ops.shape(x)[-1])), "float32")
    labels = ops.reshape(ops.cast(labels, "int32"), (-1,))
    table, bias = ops.cast(table, "float32"), ops.cast(bias, "float32")
    sampled = keras.random.randint((num_sampled,), 0, ops.shape(table)[0], seed=seed,
                                   dtype="int32")
    true = ops.sum(x * ops.take(table, labels, axis=0), axis=-1) + ops.take(bias, labels)
    other = ops.matmul(x, ops.transpose(ops.take(table, sampled, axis=0)))
    other = other + ops.take(bias, sampled)
    other = ops.where(ops.equal(sampled[None, :], labels[:, None]), _NEVER, other)
    logits = ops.concatenate([true[:, None], other], axis=-1)
    ce = ops.logsumexp(logits, axis=-1) - true
    return ops.reshape(ce, shape)


@keras.saving.register_keras_serializable(package="kerasbert")
class ElmoPretrainer(PretrainingTask):
    """An `ElmoBackbone` trained as the two language models of its paper.

    The top biLSTM layer's forward half at word k scores word k + 1, its
    backward half word k - 1 (`lm_targets`), both against one softmax
    [vocabulary_size, projection_dim] + bias (the published biLM shares it
    between directions). The loss is the mean of the two directions' mean
    cross-entropies over the real words: full softmax
    (`kernels.decoder_cross_entropy`, for small vocabularies), or with
    `num_sampled` > 0 a sampled softmax in training (`sampled_cross_entropy`;
    `evaluate` and `call` score the full vocabulary).

    Args:
        backbone: an `ElmoBackbone` (with its sentence boundaries: the
            targets assume <S> and </S> around each row).
        vocabulary_size: int, rows of the word softmax.
        bos_id, eos_id: the ids of <S> and </S> in the word vocabulary.
        num_sampled: int, 0 for the full softmax (the published biLM
            sampled 8192 of its 793,471 words).

    Call args:
        inputs: dict with `input_char_ids` int [B, W, C] and `input_mask`
            int [B, W]; the loss also reads `word_ids` int [B, W].

    Returns:
        dict of float [B, W, P]: "forward" and "backward", the states the
        softmax scores.

    Metrics (`fit` logs): `loss`, `forward_loss`, `backward_loss`,
    `lm_accuracy` (top-1 over both directions; full softmax only).
    """

    default_learning_rate = 1e-3
    needs_masked_lm = False

    def __init__(self, backbone, vocabulary_size, bos_id=0, eos_id=1, num_sampled=0,
                 dtype=None, **kwargs):
        if "input_char_ids" not in backbone.input:
            raise ValueError(f"ElmoPretrainer trains an ElmoBackbone, not a "
                             f"{type(backbone).__name__}.")
        super().__init__(backbone, dtype=dtype, **kwargs)
        self.vocabulary_size = int(vocabulary_size)
        self.bos_id, self.eos_id = int(bos_id), int(eos_id)
        self.num_sampled = int(num_sampled)
        width = backbone.projection_dim
        self.softmax_kernel = self.add_weight(
            shape=(self.vocabulary_size, width), name="softmax_kernel",
            initializer=keras.initializers.RandomNormal(stddev=1.0 / width ** 0.5))
        self.softmax_bias = self.add_weight(shape=(self.vocabulary_size,), name="softmax_bias",
                                            initializer="zeros")
        self.seed = keras.random.SeedGenerator(0)
        self.forward_loss = keras.metrics.Mean(name="forward_loss")
        self.backward_loss = keras.metrics.Mean(name="backward_loss")
        self.lm_accuracy = keras.metrics.Mean(name="lm_accuracy")
        self.built = True

    def call(self, inputs, training=False):
        features = {k: ops.cast(inputs[k], "int32") for k in ("input_char_ids", "input_mask")}
        top = self.backbone(features, training=training)["encoder_outputs"][-1]
        width = self.backbone.projection_dim
        return {"forward": top[..., :width], "backward": top[..., width:]}

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """Keras hook for `fit`/`evaluate`: the targets are `x["word_ids"]`
        shifted each way; `y` and `sample_weight` are not used."""
        del y, sample_weight
        if y_pred is None:
            y_pred = self(x, training=False)
        weights = ops.cast(x["input_mask"], "float32")
        targets = lm_targets(x["word_ids"], x["input_mask"], self.bos_id, self.eos_id)
        total = ops.stop_gradient(cross_replica_sum(ops.sum(weights)))
        total = ops.maximum(total, _EPSILON)
        loss = 0.0
        for direction, labels in zip(("forward", "backward"), targets):
            if training and self.num_sampled:
                ce = sampled_cross_entropy(y_pred[direction], labels, self.softmax_kernel,
                                           self.softmax_bias, self.num_sampled, self.seed)
            else:
                ce, hits = decoder_cross_entropy(y_pred[direction], labels,
                                                 self.softmax_kernel, self.softmax_bias)
                self.lm_accuracy.update_state(hits, sample_weight=weights)
            getattr(self, f"{direction}_loss").update_state(ce, sample_weight=weights)
            loss = loss + 0.5 * ops.sum(weights * ce) / total
        if self.losses:
            extra = ops.sum([ops.cast(ops.sum(v), "float32") for v in self.losses])
            loss = loss + extra / num_replicas()
        return loss

    def get_config(self):
        config = super().get_config()
        config.update(vocabulary_size=self.vocabulary_size, bos_id=self.bos_id,
                      eos_id=self.eos_id, num_sampled=self.num_sampled)
        return config
