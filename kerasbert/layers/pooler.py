"""BERT's pooler: dense + tanh on the first ([CLS]) position."""

import keras

from kerasbert.layers.fused_dense import FusedDense
from kerasbert.layers.initializers import bert_initializer


@keras.saving.register_keras_serializable(package="kerasbert")
class ClsPooler(keras.layers.Layer):
    """Maps [B, T, H] to [B, H] with tanh(W h_[CLS] + b).

    Args:
        hidden_dim: int. Output width (BERT: equal to the input width).
        initializer_range: float.

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import ClsPooler
    >>> pooler = ClsPooler(hidden_dim=8)
    >>> tuple(pooler(np.zeros((2, 5, 8), "float32")).shape)   # [B, T, H] -> [B, H]
    (2, 8)
    """

    def __init__(self, hidden_dim, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.initializer_range = initializer_range
        self.dense = FusedDense(
            hidden_dim,
            activation="tanh",
            kernel_initializer=bert_initializer(initializer_range),
            dtype=self.dtype_policy,
            name="dense",
        )

    def build(self, sequence_shape):
        self.dense.build((sequence_shape[0], sequence_shape[-1]))
        self.built = True

    def call(self, sequence_output):
        return self.dense(sequence_output[:, 0, :])

    def compute_output_shape(self, sequence_shape):
        return (sequence_shape[0], self.hidden_dim)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_dim": self.hidden_dim,
                "initializer_range": self.initializer_range,
            }
        )
        return config
