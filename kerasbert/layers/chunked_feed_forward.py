"""A position-wise feed-forward network applied a chunk of positions at a
time (the Reformer's chunked feed-forward)."""

import keras
from keras import ops

from kerasbert.layers.activations import for_training
from kerasbert.layers.activations import get_activation
from kerasbert.layers.fast_dropout import FastDropout
from kerasbert.layers.fused_dense import FusedDense
from kerasbert.layers.initializers import bert_initializer


@keras.saving.register_keras_serializable(package="kerasbert")
class ChunkedFeedForward(keras.layers.Layer):
    """dense(intermediate_dim) -> activation -> dropout -> dense(H).

    The network is position-wise, so it can run on `chunk_size` positions at
    a time: the [B, T, intermediate_dim] activation, 4x the width of the
    stream in the usual sizes, then never exists at once in the forward
    pass (the peak is [B, chunk_size, intermediate_dim]). The result is the
    same to rounding; chunk_size 0 runs all positions together.

    Args:
        intermediate_dim: int.
        activation: a name of `kerasbert.layers.activations`.
        dropout: float, after the activation.
        chunk_size: int >= 0, positions per chunk (0: no chunking).
        initializer_range: float.

    Call args:
        x: float [B, T, H].

    Returns:
        float [B, T, H].

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import ChunkedFeedForward
    >>> feed_forward = ChunkedFeedForward(intermediate_dim=16, chunk_size=2)
    >>> x = np.zeros((2, 6, 8), "float32")                    # [B, T, H]
    >>> tuple(feed_forward(x).shape)                          # [B, T, H], 2 positions at a time
    (2, 6, 8)
    """

    def __init__(self, intermediate_dim, activation="relu", dropout=0.0, chunk_size=0,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(chunk_size, int) or chunk_size < 0:
            raise ValueError(f"chunk_size={chunk_size!r}: must be an integer >= 0.")
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.dropout = dropout
        self.chunk_size = chunk_size
        self.initializer_range = initializer_range
        self.activation_fn = get_activation(activation)
        self.dropout_layer = FastDropout(dropout, dtype=self.dtype_policy)

    def build(self, x_shape):
        init = bert_initializer(self.initializer_range)
        self.intermediate_dense = FusedDense(
            self.intermediate_dim, kernel_initializer=init, dtype=self.dtype_policy,
            name="intermediate")
        self.output_dense = FusedDense(
            x_shape[-1], kernel_initializer=init, dtype=self.dtype_policy, name="output")
        self.intermediate_dense.build(x_shape)
        self.output_dense.build(tuple(x_shape[:-1]) + (self.intermediate_dim,))
        self.built = True

    def _network(self, x, training):
        activation = for_training(self.activation_fn, training)
        h = self.dropout_layer(activation(self.intermediate_dense(x)), training=training)
        return self.output_dense(h)

    def call(self, x, training=None):
        if not self.chunk_size:
            return self._network(x, training)
        shape = ops.shape(x)
        batch, length, width = shape[0], shape[1], shape[2]
        size = self.chunk_size
        padded = ((length + size - 1) // size) * size
        chunks = ops.reshape(ops.pad(x, [[0, 0], [0, padded - length], [0, 0]]),
                             (batch, padded // size, size, width))
        # One chunk after another (keras.ops.map runs sequentially).
        out = ops.map(lambda c: self._network(c, training), ops.transpose(chunks, (1, 0, 2, 3)))
        out = ops.reshape(ops.transpose(out, (1, 0, 2, 3)), (batch, padded, width))
        return out[:, :length]

    def compute_output_shape(self, x_shape):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({"intermediate_dim": self.intermediate_dim, "activation": self.activation,
                       "dropout": self.dropout, "chunk_size": self.chunk_size,
                       "initializer_range": self.initializer_range})
        return config
