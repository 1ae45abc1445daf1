"""The gated feed-forward block (GLU variants, Shazeer 2020)."""

import keras
from keras import ops

from kerasbert.layers.activations import for_training
from kerasbert.layers.activations import get_activation
from kerasbert.layers.fast_dropout import FastDropout
from kerasbert.layers.fused_dense import FusedDense
from kerasbert.layers.initializers import bert_initializer


@keras.saving.register_keras_serializable(package="kerasbert")
class GatedFeedForward(keras.layers.Layer):
    """x -> W_o(act(a) * g), where [a | g] = W_i(x).

    One input projection to 2 x intermediate_dim; its first half goes
    through the activation and is multiplied, element by element, by the
    second half (the gate). With GELU this is GeGLU (ModernBERT), with SiLU
    SwiGLU. The gate costs a third more weights than BERT's feed-forward at
    the same intermediate_dim, which is why GLU models shrink it (ModernBERT
    base: 1,152 for a width of 768, where BERT has 3,072).

    Args:
        intermediate_dim: int. Width of each half.
        activation: str, a name from `kerasbert.layers.activations`.
        use_bias: bool. Biases on both projections (False in ModernBERT).
        dropout: float. On the gated product, before W_o.
        initializer_range: float.

    Call args:
        x: float [B, T, H].

    Returns:
        float [B, T, H].

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import GatedFeedForward
    >>> block = GatedFeedForward(intermediate_dim=6)
    >>> tuple(block(np.zeros((2, 5, 4), "float32")).shape)   # [B, T, H]
    (2, 5, 4)
    >>> [tuple(w.shape) for w in block.weights]               # W_i [H, 2I], W_o [I, H]
    [(4, 12), (6, 4)]
    """

    def __init__(self, intermediate_dim, activation="gelu", use_bias=False, dropout=0.0,
                 initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.use_bias = bool(use_bias)
        self.dropout = dropout
        self.initializer_range = initializer_range
        self._activation = get_activation(activation)  # fails early on an unknown name
        self.dropout_layer = FastDropout(dropout, dtype=self.dtype_policy, name="dropout")

    def build(self, x_shape):
        init = bert_initializer(self.initializer_range)
        self.input_dense = FusedDense(2 * self.intermediate_dim, use_bias=self.use_bias,
                                      kernel_initializer=init, dtype=self.dtype_policy,
                                      name="input")
        self.output_dense = FusedDense(x_shape[-1], use_bias=self.use_bias,
                                       kernel_initializer=init, dtype=self.dtype_policy,
                                       name="output")
        self.input_dense.build(x_shape)
        self.output_dense.build(tuple(x_shape[:-1]) + (self.intermediate_dim,))
        self.built = True

    def call(self, x, training=None):
        inner, gate = ops.split(self.input_dense(x), 2, axis=-1)
        gated = self.dropout_layer(for_training(self._activation, training)(inner) * gate,
                                   training=training)
        return self.output_dense(gated)

    def compute_output_shape(self, x_shape):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({"intermediate_dim": self.intermediate_dim, "activation": self.activation,
                       "use_bias": self.use_bias, "dropout": self.dropout,
                       "initializer_range": self.initializer_range})
        return config
