"""Sequence classification and regression on the pooled [CLS] output."""

import keras
from keras import ops

from kerasbert.tasks.pearson_correlation import StreamingPearsonCorrelation
from kerasbert.tasks.task import LazyPreprocessorClass
from kerasbert.tasks.task import Task
from kerasbert.tasks.task import head_initializer


def _preprocessor_class():
    # lazy: tensorflow (the preprocessor runs in tf.data; the model runs on any backend)
    from kerasbert.preprocessing.text_classifier_preprocessor import TextClassifierPreprocessor

    return TextClassifierPreprocessor


def pre_classifier(backbone, dtype):
    """The dense layer that stands in for a pooler, or None.

    BERT-like backbones pool [CLS] themselves (dense + tanh). DistilBERT and
    RoBERTa have no pooler (`backbone.pooler is None`, `pooled_output` is the
    raw [CLS] vector); their original classifiers put a trained
    Dense(hidden_dim) with `backbone.classifier_activation` (DistilBERT:
    ReLU, RoBERTa: tanh) on it first. Returns that layer, built, named
    "pre_classifier". GPT has neither a pooler nor a pre-classifier
    (`classifier_activation` None: GPT-1's classifier is linear).
    """
    if getattr(backbone, "pooler", None) is not None:
        return None
    if getattr(backbone, "classifier_activation", None) is None:
        return None
    layer = keras.layers.Dense(
        backbone.output_dim,
        activation=backbone.classifier_activation,
        kernel_initializer=head_initializer(backbone),
        dtype=dtype,
        name="pre_classifier",
    )
    layer.build((None, backbone.output_dim))
    return layer


@keras.saving.register_keras_serializable(package="kerasbert")
class TextClassifier(Task):
    """Classifies a text or a text pair; `num_classes=1` is regression.

    `pooled_output` -> dropout -> Dense(num_classes). Backbones without a
    pooler (`backbone.pooler is None`: DistilBERT, RoBERTa) give the raw
    [CLS] vector as `pooled_output`; the head then starts with the
    originals' pre-classifier: [CLS] -> Dense(hidden_dim,
    backbone.classifier_activation) named "pre_classifier" -> dropout ->
    Dense(num_classes). Pairs are packed as `[CLS] a [SEP] b [SEP]` with
    `input_type_ids` 1 on segment b; the model needs nothing else to tell
    them apart.

    Args:
        backbone: a `kerasbert.models.Backbone`.
        num_classes: int >= 1. 1 = regression (e.g. STS-B).
        dropout: float, before the head (0.1).
        dtype: defaults to the backbone's policy.

    Call args:
        inputs: dict of int [B, T] `input_word_ids`, `input_mask`,
            `input_type_ids` (optional, default zeros); other keys ignored.

    Returns:
        float32 logits [B, num_classes] (regression: the prediction [B, 1]).

    Labels for `fit`: int [B] class ids (regression: float [B] or [B, 1]).

    `compile()` defaults (`Task.compile`: AdamW, lr 2e-5, warm-up 10%):
        classification: `SparseCategoricalCrossentropy(from_logits=True)`,
            metrics `SparseCategoricalAccuracy(name="accuracy")`.
        regression: `MeanSquaredError`, metrics `MeanAbsoluteError(name="mae")`
            and `StreamingPearsonCorrelation(name="pearson")`.

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import BertBackbone
    >>> from kerasbert.tasks import TextClassifier
    >>> backbone = BertBackbone.from_preset("bert_tiny", vocabulary_size=10, num_layers=1)
    >>> model = TextClassifier(backbone, num_classes=3)      # random weights
    >>> ids = np.array([[2, 5, 6, 3], [2, 7, 3, 0]])         # [B, T], 0 = padding
    >>> tuple(model({"input_word_ids": ids, "input_mask": np.int32(ids > 0)}).shape)   # [B, C]
    (2, 3)
    """

    preprocessor_class = LazyPreprocessorClass(_preprocessor_class)
    label_argument = "num_classes"

    def __init__(self, backbone, num_classes, dropout=0.1, dtype=None, **kwargs):
        super().__init__(backbone, dropout=dropout, dtype=dtype, **kwargs)
        num_classes = int(num_classes)
        if num_classes < 1:
            raise ValueError(
                f"num_classes must be >= 1 (1 = regression), got {num_classes}."
            )
        self.num_classes = num_classes
        self.pre_classifier = pre_classifier(backbone, self.head_dtype)
        self.output_dense = keras.layers.Dense(
            num_classes,
            kernel_initializer=head_initializer(backbone),
            dtype=self.head_dtype,
            name="logits",
        )
        self.output_dense.build((None, backbone.output_dim))
        self.built = True

    @property
    def is_regression(self):
        return self.num_classes == 1

    def preprocessor_arguments(self):
        return {"task_type": "regression"} if self.is_regression else {}

    def num_label_names(self):
        return None if self.is_regression else self.num_classes

    def call(self, inputs, training=False):
        pooled = self.encode(inputs, training=training)["pooled_output"]
        if self.pre_classifier is not None:
            pooled = self.pre_classifier(pooled)
        x = self.output_dropout(pooled, training=training)
        return ops.cast(self.output_dense(x), "float32")

    def default_loss(self):
        if self.is_regression:
            return keras.losses.MeanSquaredError()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        if self.is_regression:
            return [
                keras.metrics.MeanAbsoluteError(name="mae"),
                StreamingPearsonCorrelation(name="pearson"),
            ]
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def get_config(self):
        config = super().get_config()
        config["num_classes"] = self.num_classes
        return config
