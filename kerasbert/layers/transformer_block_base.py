"""What the encoder and decoder blocks share: their options and the
feed-forward sub-layer (`TransformerEncoderBlock`, `TransformerDecoderBlock`)."""

import keras

from kerasbert.layers.activations import get_activation
from kerasbert.layers.fast_dropout import FastDropout
from kerasbert.layers.fused_dense import FusedDense
from kerasbert.layers.fused_layer_norm import FusedLayerNorm
from kerasbert.layers.precision import ResidualStreamPrecision


class TransformerBlockBase(ResidualStreamPrecision, keras.layers.Layer):
    """Base of the transformer blocks: the options both take, the
    LayerNorm and Dropout sub-layers made from them, and the feed-forward
    network ``Dense_H(act(Dense_I(x)))`` with its dropout and LayerNorm.

    Not registered for saving: only its subclasses are built and saved,
    under their own names; the sub-layers keep their attribute and layer
    names (`intermediate`, `output`, `output_dropout`, `output_layer_norm`),
    so checkpoints written before this base existed still load.

    Args:
        num_heads: int.
        intermediate_dim: int. Width of the feed-forward hidden layer.
        activation: str. A name from `kerasbert.layers.activations`;
            an unknown name fails here.
        dropout: float. On each sub-layer's output and the attention
            probabilities.
        layer_norm_epsilon: float.
        initializer_range: float. Stddev of the kernels' truncated normal.
        norm_first: bool. Pre-LN (LayerNorm before each branch) instead of
            post-LN (after each residual add).
        use_bias: bool. Biases on the attention projections.
    """

    def __init__(self, num_heads, intermediate_dim, activation, dropout, layer_norm_epsilon,
                 initializer_range, norm_first, use_bias, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.activation = activation
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.norm_first = bool(norm_first)
        self.use_bias = bool(use_bias)
        get_activation(activation)  # Fail early on an unknown name.

    def _layer_norm(self, name):
        """A LayerNormalization sub-layer with the block's epsilon, on the
        residual stream's policy."""
        return FusedLayerNorm(
            epsilon=self.layer_norm_epsilon, dtype=self.stream_policy, name=name)

    def _dropout(self, name):
        """A Dropout sub-layer at the block's rate, before a residual add:
        on the residual stream's policy."""
        return FastDropout(self.dropout, dtype=self.stream_policy, name=name)

    def _make_feed_forward(self, hidden_dim, init):
        """Creates the feed-forward sub-layers: `intermediate_dense` (->
        intermediate_dim, the activation), `output_dense` (-> hidden_dim),
        `output_dropout`, `output_layer_norm`, in that order (the order of
        `weights`); `_build_feed_forward` builds them.

        Call it where the subclass's `build` always made them: after its
        attention layers, before building any of them, with the `init` it
        made first. Unseeded initializers and dropout layers draw their
        seeds when made, so that order keeps a seeded model's initial
        values.
        """
        self.intermediate_dense = FusedDense(
            self.intermediate_dim, activation=self.activation,
            kernel_initializer=init, dtype=self.dtype_policy, name="intermediate")
        self.output_dense = FusedDense(hidden_dim, kernel_initializer=init,
                                       dtype=self.dtype_policy, name="output")
        self.output_dropout = self._dropout("output_dropout")
        self.output_layer_norm = self._layer_norm("output_layer_norm")

    def _build_feed_forward(self, x_shape):
        """Builds the feed-forward sub-layers for inputs of `x_shape`
        [B, T, H]."""
        self.intermediate_dense.build(x_shape)
        self.output_dense.build(tuple(x_shape[:-1]) + (self.intermediate_dim,))
        self.output_layer_norm.build(x_shape)

    def _feed_forward(self, x):
        """float [B, T, H] -> [B, T, H], without dropout or residual."""
        return self.output_dense(self.intermediate_dense(x))

    def _options_config(self):
        """The config entries of the options every block stores."""
        return {
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "activation": self.activation,
            "dropout": self.dropout,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer_range": self.initializer_range,
        }
