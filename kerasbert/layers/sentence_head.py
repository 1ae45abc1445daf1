"""Sentence-level classifier on the pooled output (NSP, SOP)."""

import keras
from keras import ops

from kerasbert.layers.fused_dense import FusedDense
from kerasbert.layers.initializers import bert_initializer


@keras.saving.register_keras_serializable(package="kerasbert")
class NextSentenceHead(keras.layers.Layer):
    """Two-way classifier over `pooled_output` for next-sentence (BERT) or
    sentence-order (ALBERT) prediction.

    Label meaning follows the original data: class 1 = "B is a random
    sentence" (NSP) / "order swapped" (SOP), class 0 = "B really follows A".

    Args:
        num_classes: int (2 for NSP and SOP).
        initializer_range: float.

    Call args:
        pooled_output: float tensor [B, H].

    Returns:
        float32 logits [B, num_classes].

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import NextSentenceHead
    >>> head = NextSentenceHead()
    >>> tuple(head(np.zeros((4, 8), "float32")).shape)        # pooled [B, H] -> logits [B, 2]
    (4, 2)
    """

    def __init__(self, num_classes=2, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.initializer_range = initializer_range
        self.dense = FusedDense(
            num_classes,
            kernel_initializer=bert_initializer(initializer_range),
            dtype=self.dtype_policy,
            name="logits",
        )

    def build(self, pooled_shape):
        self.dense.build(pooled_shape)
        self.built = True

    def call(self, pooled_output):
        return ops.cast(self.dense(pooled_output), "float32")

    def compute_output_shape(self, pooled_shape):
        return (pooled_shape[0], self.num_classes)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_classes": self.num_classes,
                "initializer_range": self.initializer_range,
            }
        )
        return config
