"""Sequence-to-sequence language modelling: the Transformer's translation
model (Vaswani et al., 2017): label-smoothed training and beam search.

Token conventions (the task layer builds the ids; the model takes the start
and end ids as arguments): padding id 0; source = subword ids + end id;
decoder input = start id + target ids; labels = target ids + end id (0 =
padding, never scored).
"""

import keras
from keras import ops

from kerasbert.decoding import SEARCH_STRATEGIES
from kerasbert.decoding import beam_search
from kerasbert.decoding import greedy_search
from kerasbert.optimizers.recipes import TRANSFORMER_TRAINING
from kerasbert.optimizers.recipes import transformer_peak
from kerasbert.optimizers.recipes import transformer_warmup_steps
from kerasbert.optimizers.schedules import InverseSquareRootSchedule
from kerasbert.tasks.task import LazyPreprocessorClass
from kerasbert.tasks.task import Task

STRATEGIES = SEARCH_STRATEGIES


def _preprocessor_class():
    # lazy: tensorflow (the preprocessor runs in tf.data; the model runs on any backend)
    from kerasbert.preprocessing.text2text_preprocessor import Text2TextPreprocessor

    return Text2TextPreprocessor


def _is_dataset(value):
    # A tf.data.Dataset without importing TensorFlow here (other backends).
    return hasattr(value, "element_spec") and hasattr(value, "as_numpy_iterator")


def _is_text(value):
    """Whether `generate`'s input is source text rather than token ids."""
    if isinstance(value, (str, bytes)) or _is_dataset(value):
        return True
    if isinstance(value, (list, tuple)):
        return bool(value) and all(isinstance(v, (str, bytes)) for v in value)
    dtype = getattr(value, "dtype", None)
    return dtype is not None and getattr(dtype, "kind", None) in ("U", "S", "O")


def _source_list(sources):
    """str / list / NumPy array / tf.data of strings -> list of str."""
    if isinstance(sources, (str, bytes)):
        sources = [sources]
    elif _is_dataset(sources):
        flat = []
        for item in sources.as_numpy_iterator():
            flat.extend(item.reshape(-1).tolist() if hasattr(item, "reshape") else [item])
        sources = flat
    elif hasattr(sources, "tolist"):
        sources = sources.reshape(-1).tolist()
    return [s.decode("utf-8") if isinstance(s, bytes) else str(s) for s in sources]


@keras.saving.register_keras_serializable(package="kerasbert")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Token cross-entropy against smoothed targets, averaged over the
    tokens whose label is not padding (Szegedy et al., 2016; the
    Transformer's epsilon_ls = 0.1): the target puts 1 - epsilon on the
    label and spreads epsilon evenly over the whole vocabulary, so

        loss = (1 - epsilon) * -log p(label) + epsilon * mean_v(-log p(v)).

    Args:
        label_smoothing: float in [0, 1).

    Call args:
        y_true: int [B, T] labels, 0 = padding.
        y_pred: float [B, T, V] logits.

    Returns:
        float32 scalar: the mean over real tokens (0 when there are none).

    Example:

    >>> import math
    >>> import numpy as np
    >>> from kerasbert.tasks import LabelSmoothedCrossEntropy
    >>> loss = LabelSmoothedCrossEntropy(label_smoothing=0.1)
    >>> labels = np.array([[5, 6, 0]])                       # [B, T], 0 = padding
    >>> logits = np.zeros((1, 3, 10), "float32")             # [B, T, V]: uniform
    >>> round(float(loss(labels, logits)), 4) == round(math.log(10), 4)
    True
    """

    def __init__(self, label_smoothing=0.1, name="label_smoothed_cross_entropy", **kwargs):
        super().__init__(name=name, **kwargs)
        if not 0.0 <= float(label_smoothing) < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing!r}.")
        self.label_smoothing = float(label_smoothing)

    def call(self, y_true, y_pred):
        labels = ops.cast(y_true, "int32")
        weights = ops.cast(ops.not_equal(labels, 0), "float32")
        log_probs = ops.log_softmax(ops.cast(y_pred, "float32"), axis=-1)
        nll = -ops.take_along_axis(log_probs, ops.expand_dims(labels, -1), axis=-1)[..., 0]
        uniform = -ops.mean(log_probs, axis=-1)
        eps = self.label_smoothing
        per_token = (1.0 - eps) * nll + eps * uniform
        return ops.sum(per_token * weights) / ops.maximum(ops.sum(weights), 1.0)

    def get_config(self):
        return {**super().get_config(), "label_smoothing": self.label_smoothing}


@keras.saving.register_keras_serializable(package="kerasbert")
class Seq2SeqLM(Task):
    """An encoder-decoder backbone (`TransformerBackbone`) with its tied
    softmax: logits for the next target token, the label-smoothed loss, and
    greedy or beam-search generation.

    Args:
        backbone: a `TransformerBackbone` (anything with its `encode`,
            `decode_step`, `logits`, `decoding_memory`, `decoding_cache`).
        label_smoothing: float, epsilon_ls of `compile`'s default loss (0.1).
        preprocessor: optional, the text2text task's.
        dtype: defaults to the backbone's policy.

    Call args:
        inputs: dict with int [B, S] `encoder_token_ids`, [B, T]
            `decoder_token_ids` (the start id, then the target), and the
            optional 0/1 masks `encoder_padding_mask` (default: id != 0)
            and `decoder_padding_mask` (default: all ones; causal attention
            keeps right padding invisible anyway). Other keys are ignored.

    Returns:
        float32 [B, T, V]: position t scores decoder token t + 1 (the
        label at t).

    `compile()` defaults: the paper's Adam (beta_1 0.9, beta_2 0.98, epsilon
    1e-9) on `InverseSquareRootSchedule(hidden_dim, warmup_steps=4000)`, and
    `LabelSmoothedCrossEntropy(label_smoothing)` on labels [B, T]; a recipe
    (`compile_with_recipe`, `kerasbert finetune`) sets the schedule's peak
    and warm-up (`compile`).

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import TransformerBackbone
    >>> from kerasbert.tasks import Seq2SeqLM
    >>> backbone = TransformerBackbone(vocabulary_size=10, num_layers=1, num_heads=2,
    ...                                hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
    >>> model = Seq2SeqLM(backbone)
    >>> source = np.array([[5, 6, 7, 2]])                    # [B, S], 2 = end
    >>> logits = model({"encoder_token_ids": source,
    ...                 "decoder_token_ids": np.array([[1, 8, 9]])})   # [B, T], 1 = start
    >>> tuple(logits.shape)                                  # [B, T, V]
    (1, 3, 10)
    >>> tuple(model.generate(source, max_length=4, start_id=1, end_id=2).shape)   # beam search
    (1, 4)
    """

    # [text2text fix, by the text2text task's engineer] the task's preprocessor
    # (finetune and export build it from here).
    preprocessor_class = LazyPreprocessorClass(_preprocessor_class)

    def __init__(self, backbone, label_smoothing=TRANSFORMER_TRAINING["label_smoothing"],
                 preprocessor=None, dtype=None, **kwargs):
        kwargs.pop("dropout", None)  # no head, so no head dropout
        super().__init__(backbone, dropout=0.0, preprocessor=preprocessor, dtype=dtype,
                         **kwargs)
        if not 0.0 <= float(label_smoothing) < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing!r}.")
        self.label_smoothing = float(label_smoothing)
        # [text2text fix] built here, as the other tasks: Keras then never
        # locks its state, so `kerasbert export` can set `model.preprocessor`
        # on a loaded model.
        self.built = True

    @staticmethod
    def _features(inputs):
        if not isinstance(inputs, dict):
            raise TypeError("Seq2SeqLM takes a dict with encoder_token_ids and "
                            f"decoder_token_ids; got {type(inputs).__name__}.")
        missing = [k for k in ("encoder_token_ids", "decoder_token_ids") if k not in inputs]
        if missing:
            raise KeyError(f"Missing input(s) {', '.join(missing)}; got keys {sorted(inputs)}.")
        source = ops.cast(inputs["encoder_token_ids"], "int32")
        target = ops.cast(inputs["decoder_token_ids"], "int32")
        source_mask = inputs.get("encoder_padding_mask")
        target_mask = inputs.get("decoder_padding_mask")
        return {
            "encoder_token_ids": source,
            "encoder_padding_mask": (ops.cast(ops.not_equal(source, 0), "int32")
                                     if source_mask is None else ops.cast(source_mask, "int32")),
            "decoder_token_ids": target,
            "decoder_padding_mask": (ops.ones_like(target) if target_mask is None
                                     else ops.cast(target_mask, "int32")),
        }

    def call(self, inputs, training=None):
        hidden = self.backbone(self._features(inputs), training=training)
        return self.backbone.logits(hidden)

    # --- training setup -----------------------------------------------------

    def default_loss(self):
        return LabelSmoothedCrossEntropy(self.label_smoothing)

    def compile(self, optimizer="auto", loss="auto", *, learning_rate=None,
                num_train_steps=None, warmup_ratio=None, warmup_steps=None, weight_decay=0.0,
                layer_decay=None, clipnorm=None, **kwargs):
        """`Task.compile` with the paper's optimizer for "auto", whatever
        recipe asks (`optimizers.recipes`: the Transformer's recipe):
        Adam(0.9, 0.98, 1e-9) on `InverseSquareRootSchedule`.

        Args:
            learning_rate: the schedule's peak, reached on the last warm-up
                step: lr(n) = learning_rate * min(sqrt(w / n), n / w).
                None: the paper's, (hidden_dim * w)^-0.5.
            num_train_steps, warmup_ratio: the run's updates and warm-up
                share: w = min(4000, round(warmup_ratio * num_train_steps))
                (`recipes.transformer_warmup_steps`); without
                num_train_steps, the paper's 4000.
            warmup_steps: an explicit w (overrides the two above).
            weight_decay: 0 (Adam, the paper's); above 0, AdamW with the
                same moments.
            layer_decay, clipnorm: not used by the paper; clipnorm is
                passed to the optimizer when given.
        """
        # [transformer recipe] `compile_with_recipe` (kerasbert finetune)
        # lands here too: the family's optimizer, the recipe's numbers.
        if isinstance(optimizer, str) and optimizer == "auto":
            optimizer = self._paper_optimizer(learning_rate, num_train_steps, warmup_ratio,
                                              warmup_steps, weight_decay, clipnorm)
        super().compile(optimizer=optimizer, loss=loss, **kwargs)

    def _paper_optimizer(self, learning_rate, num_train_steps, warmup_ratio, warmup_steps,
                         weight_decay, clipnorm):
        hidden_dim = self.backbone.hidden_dim
        warmup = int(warmup_steps or transformer_warmup_steps(num_train_steps, warmup_ratio))
        # The factor that puts the schedule's peak, (d * w)^-0.5 * scale, at learning_rate.
        scale = 1.0 if learning_rate is None else float(learning_rate) / transformer_peak(
            hidden_dim, warmup)
        schedule = InverseSquareRootSchedule(hidden_dim, warmup, scale=scale)
        moments = dict(learning_rate=schedule, beta_1=TRANSFORMER_TRAINING["beta_1"],
                       beta_2=TRANSFORMER_TRAINING["beta_2"],
                       epsilon=TRANSFORMER_TRAINING["epsilon"], clipnorm=clipnorm)
        if weight_decay:
            return keras.optimizers.AdamW(weight_decay=float(weight_decay), **moments)
        return keras.optimizers.Adam(**moments)

    # --- generation -----------------------------------------------------------

    def generate(self, encoder_token_ids, encoder_padding_mask=None, *, max_length=None,
                 start_id=None, end_id=None, strategy="beam", beam_size=4, length_penalty=0.6,
                 batch_size=32):
        """Translates a batch of sources: token ids in, ids out; or, with a
        preprocessor attached, raw text in, text out (as keras-hub's
        `generate`).

        `keras.ops` only, with `ops.while_loop`: it traces inside
        `tf.function(autograph=False)` (serving signatures) and runs under
        JAX.

        Args:
            encoder_token_ids: int [B, S]; or source text: a str, a list /
                NumPy array of str, or a `tf.data.Dataset` of strings
                (batched or not). Text needs `self.preprocessor`, which
                encodes it, generates `batch_size` at a time and decodes
                (`Text2TextPreprocessor.generate`: what the exported
                SavedModel answers).
            encoder_padding_mask: int [B, S], 1 = real token (ids only;
                default: id != 0).
            max_length: int, tokens to generate at most (<= the backbone's
                max_sequence_length; text: default the preprocessor's
                target_length).
            start_id, end_id: ints, the decoder's first token and the token
                that ends a translation (text: the preprocessor's).
            strategy: "beam" (tensor2tensor's beam search, as Model Garden's)
                or "greedy".
            beam_size: int, beams (4 in the paper).
            length_penalty: float, alpha of ((5 + length) / 6) ** alpha (0.6).

        Returns:
            ids in: int32 [B, max_length]: the best beam's tokens after
            `start_id`, `end_id` included, 0 after it. Text in: a list of
            str, one per source (a str for a str).
        """
        if _is_text(encoder_token_ids):
            return self._generate_text(encoder_token_ids, max_length=max_length,
                                       strategy=strategy, beam_size=beam_size,
                                       length_penalty=length_penalty, batch_size=batch_size)
        self._check_search(max_length, start_id, end_id, strategy, beam_size)
        max_length = int(max_length)
        beams = 1 if strategy == "greedy" else int(beam_size)
        step, cache = self._decoding_step(encoder_token_ids, encoder_padding_mask, max_length,
                                          beams)
        start = ops.full((ops.shape(encoder_token_ids)[0],), int(start_id), "int32")
        if strategy == "greedy":
            tokens, _ = greedy_search(step, start, cache, max_length, int(end_id))
        else:
            tokens, _ = beam_search(step, start, cache, self.backbone.vocabulary_size,
                                    max_length, int(end_id), beam_size=beams,
                                    alpha=float(length_penalty))
        return tokens

    def _check_search(self, max_length, start_id, end_id, strategy, beam_size):
        """ValueError naming a missing or bad option of `generate` on ids."""
        if max_length is None or start_id is None or end_id is None:
            raise ValueError("Token ids in: give max_length, start_id and end_id (or pass "
                             "source strings to a model with a preprocessor).")
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}.")
        limit = self.backbone.max_sequence_length
        if not 1 <= int(max_length) <= limit:
            raise ValueError(f"max_length must be in [1, {limit}] (the backbone's "
                             f"max_sequence_length), got {max_length}.")
        if int(beam_size) < 1:
            raise ValueError(f"beam_size must be >= 1, got {beam_size!r}.")

    def _decoding_step(self, encoder_token_ids, encoder_padding_mask, max_length, beams):
        """The decoder as the searches' step function: (step_fn, cache).

        The source is encoded once here; `step_fn` (token ids int32
        [B * beams], index, cache) -> (logits [B * beams, V], cache) reads
        its memory repeated `beams` times per example (every beam of an
        example reads the same source), and `cache` is the decoder's
        key/value cache for B rows of `max_length` tokens.
        """
        backbone = self.backbone
        source = ops.cast(encoder_token_ids, "int32")
        source_mask = (ops.cast(ops.not_equal(source, 0), "int32")
                       if encoder_padding_mask is None
                       else ops.cast(encoder_padding_mask, "int32"))
        memory = backbone.decoding_memory(backbone.encode(source, source_mask, training=False),
                                          source_mask)
        if beams > 1:
            memory = keras.tree.map_structure(lambda x: ops.repeat(x, beams, axis=0), memory)

        def step(tokens, index, cache):
            hidden, cache = backbone.decode_step(tokens, index, cache, memory)
            return backbone.logits(hidden), cache

        return step, backbone.decoding_cache(ops.shape(source)[0], max_length)

    def _generate_text(self, sources, batch_size=32, **options):
        if self.preprocessor is None:
            raise ValueError("Seq2SeqLM.generate on text needs a preprocessor (a "
                             "Text2TextPreprocessor); without one, pass token ids.")
        single = isinstance(sources, (str, bytes))
        texts = self.preprocessor.generate(self, _source_list(sources), batch_size=batch_size,
                                           **options)
        return texts[0] if single else texts

    # --- config -------------------------------------------------------------

    def get_config(self):
        config = super().get_config()
        config.pop("dropout", None)
        config["label_smoothing"] = self.label_smoothing
        return config
