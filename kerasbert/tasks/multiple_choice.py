"""Multiple choice (SWAG, RACE, ...): one score per choice, softmax across."""

import keras
from keras import ops

from kerasbert.tasks.task import BACKBONE_INPUTS
from kerasbert.tasks.task import LazyPreprocessorClass
from kerasbert.tasks.task import Task
from kerasbert.tasks.task import head_initializer
from kerasbert.tasks.text_classifier import pre_classifier


def _preprocessor_class():
    # lazy: tensorflow (the preprocessor runs in tf.data; the model runs on any backend)
    from kerasbert.preprocessing.multiple_choice_preprocessor import MultipleChoicePreprocessor

    return MultipleChoicePreprocessor


@keras.saving.register_keras_serializable(package="kerasbert")
class MultipleChoice(Task):
    """Scores each `[CLS] context [SEP] choice [SEP]` and picks one.

    The [B, C, T] inputs are flattened to [B * C, T], encoded, and
    `pooled_output` -> dropout -> Dense(1) gives one score per choice,
    reshaped to [B, C] logits (softmax across the choices). Backbones
    without a pooler (DistilBERT, RoBERTa) get the "pre_classifier" dense
    layer on the [CLS] vector first, as in `TextClassifier`.

    Args:
        backbone: a `kerasbert.models.Backbone`.
        num_choices: int >= 2 (SWAG: 4).
        dropout: float, before the head (0.1).
        dtype: defaults to the backbone's policy.

    Call args:
        inputs: dict of int [B, num_choices, T] `input_word_ids`,
            `input_mask`, `input_type_ids` (optional; context 0, choice 1).

    Returns:
        float32 logits [B, num_choices].

    Labels for `fit`: int [B], the index of the right choice.

    `compile()` defaults: `SparseCategoricalCrossentropy(from_logits=True)`,
    metrics `SparseCategoricalAccuracy(name="accuracy")`; AdamW as in
    `Task.compile`.

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import BertBackbone
    >>> from kerasbert.tasks import MultipleChoice
    >>> ids = np.array([[[2, 5, 3, 6, 3], [2, 5, 3, 7, 3]]])  # [B, C, T]: context, choice
    >>> backbone = BertBackbone(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=16)
    >>> logits = MultipleChoice(backbone, num_choices=2)({"input_word_ids": ids,
    ...                                                   "input_mask": np.ones_like(ids)})
    >>> tuple(logits.shape)                                  # [B, C]
    (1, 2)
    """

    preprocessor_class = LazyPreprocessorClass(_preprocessor_class)

    def preprocessor_arguments(self):
        return {"num_choices": self.num_choices}

    def __init__(self, backbone, num_choices, dropout=0.1, dtype=None, **kwargs):
        super().__init__(backbone, dropout=dropout, dtype=dtype, **kwargs)
        num_choices = int(num_choices)
        if num_choices < 2:
            raise ValueError(f"num_choices must be >= 2, got {num_choices}.")
        self.num_choices = num_choices
        self.pre_classifier = pre_classifier(backbone, self.head_dtype)
        self.output_dense = keras.layers.Dense(
            1,
            kernel_initializer=head_initializer(backbone),
            dtype=self.head_dtype,
            name="choice_logits",
        )
        self.output_dense.build((None, backbone.output_dim))
        self.built = True

    def call(self, inputs, training=False):
        word_ids = inputs["input_word_ids"]
        if len(word_ids.shape) != 3:
            raise ValueError(
                "MultipleChoice inputs are [batch, num_choices, sequence_length]; "
                f"input_word_ids has shape {tuple(word_ids.shape)}."
            )
        if word_ids.shape[1] is not None and word_ids.shape[1] != self.num_choices:
            raise ValueError(
                f"Inputs have {word_ids.shape[1]} choices, the model "
                f"{self.num_choices}."
            )
        length = ops.shape(word_ids)[-1]
        flat = {
            k: ops.reshape(inputs[k], (-1, length))
            for k in BACKBONE_INPUTS
            if k in inputs
        }
        pooled = self.encode(flat, training=training)["pooled_output"]
        if self.pre_classifier is not None:
            pooled = self.pre_classifier(pooled)
        x = self.output_dropout(pooled, training=training)
        scores = ops.cast(self.output_dense(x), "float32")
        return ops.reshape(scores, (-1, self.num_choices))

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def get_config(self):
        config = super().get_config()
        config["num_choices"] = self.num_choices
        return config
