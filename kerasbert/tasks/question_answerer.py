"""Extractive question answering (SQuAD v1.1 / v2.0): start/end logits."""

import keras
from keras import ops

from kerasbert.tasks.task import LazyPreprocessorClass
from kerasbert.tasks.task import Task
from kerasbert.tasks.task import head_initializer

# Logit given to padding positions: exp(-1e4 - max) is 0 in float32, and the
# value is finite in every dtype (the logits are float32 by then anyway).
PADDING_LOGIT = -1e4
OUTPUT_NAMES = ("start_logits", "end_logits")
LABEL_NAMES = ("start_positions", "end_positions")


def _preprocessor_class():
    # lazy: tensorflow (the preprocessor runs in tf.data; the model runs on any backend)
    from kerasbert.preprocessing.question_answerer_preprocessor import QuestionAnswererPreprocessor

    return QuestionAnswererPreprocessor


@keras.saving.register_keras_serializable(package="kerasbert")
class QuestionAnswerer(Task):
    """Predicts an answer span: `sequence_output` -> dropout -> Dense(2).

    Input windows are `[CLS] question [SEP] context-window [SEP]`. Padding
    positions (`input_mask == 0`) get the logit -1e4, so they never take
    probability mass; [CLS] (position 0) stands for "no answer" (SQuAD
    v2.0, or the answer is outside this window).

    Decode spans (n-best search, `max_answer_length`, the v2.0 null-score
    threshold, best span over the windows of one example, answer text
    from character offsets) with `kerasbert.preprocessing.qa_decoding`.

    Args:
        backbone: a `kerasbert.models.Backbone`.
        dropout: float, before the head (0.1).
        dtype: defaults to the backbone's policy.

    Call args:
        inputs: dict of int [B, T] `input_word_ids`, `input_mask`,
            `input_type_ids` (question 0, context 1).

    Returns:
        dict of float32 [B, T]: `start_logits`, `end_logits`.

    Labels for `fit`: a dict of int [B] `start_positions`, `end_positions`
    (token indices in the window; 0 = [CLS] = no answer), or a tuple
    (start_positions, end_positions), or a dict keyed by the output names.

    `compile()` defaults: loss = the mean of the two
    `SparseCategoricalCrossentropy(from_logits=True)` (loss_weights 0.5
    each), `SparseCategoricalAccuracy` per output; AdamW as in
    `Task.compile`. Logs: `loss`, `start_logits_loss`, `end_logits_loss`,
    `start_logits_accuracy`, `end_logits_accuracy`.

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import BertBackbone
    >>> from kerasbert.tasks import QuestionAnswerer
    >>> model = QuestionAnswerer(BertBackbone.from_preset("bert_tiny", vocabulary_size=10,
    ...                                                   num_layers=1))
    >>> outputs = model({"input_word_ids": np.array([[2, 5, 3, 6, 7, 8, 3]]),     # CLS q SEP c SEP
    ...                  "input_mask": np.ones((1, 7), "int32"),
    ...                  "input_type_ids": np.array([[0, 0, 0, 1, 1, 1, 1]])})
    >>> {name: tuple(logits.shape) for name, logits in sorted(outputs.items())}
    {'end_logits': (1, 7), 'start_logits': (1, 7)}
    """

    per_token_outputs = True

    preprocessor_class = LazyPreprocessorClass(_preprocessor_class)

    def __init__(self, backbone, dropout=0.1, dtype=None, **kwargs):
        super().__init__(backbone, dropout=dropout, dtype=dtype, **kwargs)
        self.span_dense = keras.layers.Dense(
            2,
            kernel_initializer=head_initializer(backbone),
            dtype=self.head_dtype,
            name="span_logits",
        )
        self.span_dense.build((None, None, backbone.output_dim))
        self.built = True

    def call(self, inputs, training=False):
        sequence = self.encode(inputs, training=training)["sequence_output"]
        x = self.output_dropout(sequence, training=training)
        logits = ops.cast(self.span_dense(x), "float32")
        mask = ops.not_equal(ops.cast(inputs["input_mask"], "int32"), 0)
        outputs = {}
        for i, name in enumerate(OUTPUT_NAMES):
            outputs[name] = ops.where(mask, logits[..., i], PADDING_LOGIT)
        return outputs

    # --- labels -------------------------------------------------------------

    @staticmethod
    def _align_labels(y):
        """Maps `{start_positions, end_positions}` (or a pair) onto the
        output names, so Keras pairs each label with its logits."""
        if y is None:
            return y
        if isinstance(y, dict):
            if all(k in y for k in OUTPUT_NAMES):
                return {k: y[k] for k in OUTPUT_NAMES}
            missing = [k for k in LABEL_NAMES if k not in y]
            if missing:
                raise KeyError(
                    f"QuestionAnswerer labels need {', '.join(LABEL_NAMES)}; "
                    f"got keys {sorted(y)}."
                )
            return {o: y[l] for o, l in zip(OUTPUT_NAMES, LABEL_NAMES)}
        if isinstance(y, (list, tuple)) and len(y) == 2:
            return dict(zip(OUTPUT_NAMES, y))
        raise TypeError(
            "QuestionAnswerer labels must be a dict with start_positions and "
            f"end_positions (int [B]) or a pair of them; got {type(y).__name__}."
        )

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        return super().compute_loss(
            x=x,
            y=self._align_labels(y),
            y_pred=y_pred,
            sample_weight=sample_weight,
            training=training,
        )

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        return super().compute_metrics(
            x, self._align_labels(y), y_pred, sample_weight=sample_weight
        )

    # --- training setup -----------------------------------------------------

    def default_loss(self):
        return {
            name: keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            for name in OUTPUT_NAMES
        }

    def default_metrics(self):
        # Keras prefixes the output name: `start_logits_accuracy`, ...
        return {
            name: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
            for name in OUTPUT_NAMES
        }

    def compile(self, optimizer="auto", loss="auto", **kwargs):
        """`Task.compile`; with the default loss, `loss_weights` default to
        0.5 each, so the loss is the mean of the start and end losses."""
        if isinstance(loss, str) and loss == "auto" and "loss_weights" not in kwargs:
            kwargs["loss_weights"] = {name: 0.5 for name in OUTPUT_NAMES}
        super().compile(optimizer=optimizer, loss=loss, **kwargs)
