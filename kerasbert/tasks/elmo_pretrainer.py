"""ELMo's pretraining objective (Peters et al. 2018, eq. 1 of section 3.1):
a forward and a backward language model over a word vocabulary, sharing
the biLM's character encoder and one softmax."""

import math

import keras
from keras import ops

from kerasbert.kernels import decoder_cross_entropy
from kerasbert.tasks.pretraining_task import PretrainingTask
from kerasbert.tasks.pretraining_task import cross_replica_sum
from kerasbert.tasks.pretraining_task import num_replicas
from kerasbert.text.elmo_characters import batch_char_ids

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


SAMPLERS = ("log_uniform", "uniform")


def log_uniform_log_probability(ids, vocabulary_size):
    """log P(k) of the log-uniform (Zipfian) proposal over ids 0..V-1,
    P(k) = log((k + 2) / (k + 1)) / log(V + 1): frequent words first, as
    a vocabulary sorted by count lists them (TF's
    `log_uniform_candidate_sampler`, which the published biLM used)."""
    k = ops.cast(ids, "float32")
    return ops.log(ops.log((k + 2.0) / (k + 1.0)) / math.log(vocabulary_size + 1.0))


def draw_candidates(num_sampled, vocabulary_size, seed, sampler="log_uniform"):
    """`num_sampled` word ids int32 [S], drawn with replacement from the
    proposal (`SAMPLERS`): log-uniform by inverting its CDF,
    k = floor(exp(u log(V + 1))) - 1 for u uniform in [0, 1)."""
    if sampler == "uniform":
        return keras.random.randint((num_sampled,), 0, vocabulary_size, seed=seed,
                                    dtype="int32")
    u = keras.random.uniform((num_sampled,), seed=seed)
    ids = ops.floor(ops.exp(u * math.log(vocabulary_size + 1.0))) - 1.0
    return ops.cast(ops.clip(ids, 0, vocabulary_size - 1), "int32")


def sampled_cross_entropy(x, labels, table, bias, num_sampled, seed, sampler="log_uniform"):
    """Cross-entropy of `labels` against themselves and `num_sampled` words
    drawn from a proposal Q (`draw_candidates`; shared by the batch; a draw
    equal to a row's label is masked out): the sampled softmax of Jean et
    al. 2015, each logit corrected by -log(S Q(k)) (for the uniform
    proposal the correction is the same for every class and cancels). The
    published biLM drew log-uniformly over its count-sorted vocabulary.

    Args:
        x: float [..., E]; labels: int [...]; table: [V, E]; bias: [V].

    Returns:
        float32 [...].
    """
    shape = ops.shape(labels)
    x = ops.cast(ops.reshape(x, (-1, ops.shape(x)[-1])), "float32")
    labels = ops.reshape(ops.cast(labels, "int32"), (-1,))
    table, bias = ops.cast(table, "float32"), ops.cast(bias, "float32")
    size = table.shape[0]
    sampled = draw_candidates(num_sampled, size, seed, sampler)
    true = ops.sum(x * ops.take(table, labels, axis=0), axis=-1) + ops.take(bias, labels)
    other = ops.matmul(x, ops.transpose(ops.take(table, sampled, axis=0)))
    other = other + ops.take(bias, sampled)
    if sampler != "uniform":
        expected = math.log(num_sampled)
        true = true - (log_uniform_log_probability(labels, size) + expected)
        other = other - (log_uniform_log_probability(sampled, size) + expected)[None, :]
    other = ops.where(ops.equal(sampled[None, :], labels[:, None]), _NEVER, other)
    logits = ops.concatenate([true[:, None], other], axis=-1)
    ce = ops.logsumexp(logits, axis=-1) - true
    return ops.reshape(ce, shape)


def token_character_table(tokens, max_characters):
    """The character input of each vocabulary entry: int32 [V, C], row i
    the ids of `tokens[i]`'s characters (`elmo_characters.word_char_ids`;
    "##ing" and "[CLS]" as they are spelled), so token-id records (the
    `create-pretraining-data` TFRecords) feed the biLM."""
    return batch_char_ids([list(tokens)], max_characters)[0][0]


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
        sampler: the proposal of the sampled softmax, "log_uniform" (the
            published biLM's, for a vocabulary sorted by count) or
            "uniform".
        token_characters: None, or int [vocabulary_size, C]: each word
            id's character ids (`token_character_table`); the model then
            reads token ids (`input_word_ids`, as `kerasbert pretrain`'s
            TFRecords hold them) and looks their characters up in this
            constant table (a non-trainable weight, saved with the model).

    Call args:
        inputs: dict with `input_char_ids` int [B, W, C] and `input_mask`
            int [B, W]; the loss also reads `word_ids` int [B, W]. With
            `token_characters`: `input_word_ids` int [B, W] (the words and
            the targets) and `input_mask` instead.

    Returns:
        dict of float [B, W, P]: "forward" and "backward", the states the
        softmax scores.

    Metrics (`fit` logs): `loss`, `forward_loss`, `backward_loss`,
    `lm_accuracy` (top-1 over both directions; full softmax only).
    """

    default_learning_rate = 1e-3
    needs_masked_lm = False

    def __init__(self, backbone, vocabulary_size, bos_id=0, eos_id=1, num_sampled=0,
                 sampler="log_uniform", token_characters=None, reads_token_ids=None,
                 dtype=None, **kwargs):
        if "input_char_ids" not in backbone.input:
            raise ValueError(f"ElmoPretrainer trains an ElmoBackbone, not a "
                             f"{type(backbone).__name__}.")
        super().__init__(backbone, dtype=dtype, **kwargs)
        self.vocabulary_size = int(vocabulary_size)
        self.bos_id, self.eos_id = int(bos_id), int(eos_id)
        self.num_sampled = int(num_sampled)
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}.")
        self.sampler = sampler
        # From a saved config: the table's shape only; its values are weights.
        self.reads_token_ids = bool(reads_token_ids or token_characters is not None)
        self.token_characters = None
        if self.reads_token_ids:
            self.token_characters = self.add_weight(
                shape=(self.vocabulary_size, backbone.max_characters_per_token),
                dtype="int32", trainable=False, initializer="zeros", name="token_characters")
            if token_characters is not None:
                self.token_characters.assign(ops.cast(token_characters, "int32"))
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

    def word_ids(self, inputs):
        """The words the targets are made of: int32 [B, W]."""
        return ops.cast(inputs["input_word_ids" if self.reads_token_ids else "word_ids"], "int32")

    def call(self, inputs, training=False):
        features = {"input_mask": ops.cast(inputs["input_mask"], "int32")}
        if self.reads_token_ids:  # the characters of each token id's string
            features["input_char_ids"] = ops.take(self.token_characters, self.word_ids(inputs),
                                                  axis=0)
        else:
            features["input_char_ids"] = ops.cast(inputs["input_char_ids"], "int32")
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
        targets = lm_targets(self.word_ids(x), x["input_mask"], self.bos_id, self.eos_id)
        total = ops.stop_gradient(cross_replica_sum(ops.sum(weights)))
        total = ops.maximum(total, _EPSILON)
        loss = 0.0
        for direction, labels in zip(("forward", "backward"), targets):
            if training and self.num_sampled:
                ce = sampled_cross_entropy(y_pred[direction], labels, self.softmax_kernel,
                                           self.softmax_bias, self.num_sampled, self.seed,
                                           self.sampler)
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

    # --- the training-loop protocol (kerasbert.training.loop) ----------------

    def loss_terms(self, features, outputs):
        """Per-batch float32 sums of the custom loop (`kerasbert pretrain`,
        always training: the sampled softmax when `num_sampled`):
        forward_loss_sum, backward_loss_sum, lm_weight_sum (words),
        lm_correct_sum (full softmax only; else 0)."""
        weights = ops.cast(features["input_mask"], "float32")
        targets = lm_targets(self.word_ids(features), features["input_mask"], self.bos_id,
                             self.eos_id)
        terms = {"lm_weight_sum": ops.sum(weights), "lm_correct_sum": ops.zeros(())}
        for direction, labels in zip(("forward", "backward"), targets):
            if self.num_sampled:
                ce = sampled_cross_entropy(outputs[direction], labels, self.softmax_kernel,
                                           self.softmax_bias, self.num_sampled, self.seed,
                                           self.sampler)
            else:
                ce, hits = decoder_cross_entropy(outputs[direction], labels,
                                                 self.softmax_kernel, self.softmax_bias)
                terms["lm_correct_sum"] += 0.5 * ops.sum(weights * ops.cast(hits, "float32"))
            terms[f"{direction}_loss_sum"] = ops.sum(weights * ce)
        return terms

    @staticmethod
    def loss_normalizers(features):
        """{"lm_weight_sum"}: the batch's words, from the mask alone."""
        return {"lm_weight_sum": ops.sum(ops.cast(features["input_mask"], "float32"))}

    @staticmethod
    def combine_loss_terms(terms, normalizers=None):
        """The mean of the two directions' mean cross-entropies."""
        n = terms if normalizers is None else normalizers
        total = ops.maximum(n["lm_weight_sum"], _EPSILON)
        return 0.5 * (terms["forward_loss_sum"] + terms["backward_loss_sum"]) / total

    #: Progress-bar label -> metric of `summarize_terms`.
    progress_metrics = {"loss": "loss", "lm_acc": "lm_accuracy"}

    @staticmethod
    def summarize_terms(sums):
        """Global step sums -> loss, forward_loss, backward_loss,
        lm_accuracy (0 with the sampled softmax), perplexity."""
        w = max(float(sums["lm_weight_sum"]), 1e-12)
        forward, backward = float(sums["forward_loss_sum"]) / w, float(
            sums["backward_loss_sum"]) / w
        loss = 0.5 * (forward + backward)
        return {"loss": loss, "forward_loss": forward, "backward_loss": backward,
                "lm_accuracy": float(sums["lm_correct_sum"]) / w,
                "perplexity": math.exp(min(loss, 80.0))}

    def get_config(self):
        config = super().get_config()
        config.update(vocabulary_size=self.vocabulary_size, bos_id=self.bos_id,
                      eos_id=self.eos_id, num_sampled=self.num_sampled, sampler=self.sampler,
                      reads_token_ids=self.reads_token_ids)
        return config
