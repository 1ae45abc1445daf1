"""One ModernBERT layer: pre-LayerNorm attention and GeGLU branches."""

import keras
from keras import ops

from kerasbert.layers import FastDropout
from kerasbert.layers.attention import MultiHeadSelfAttention
from kerasbert.layers.gated_feed_forward import GatedFeedForward
from kerasbert.layers.precision import ResidualStreamPrecision


@keras.saving.register_keras_serializable(package="kerasbert")
class ModernBertBlock(ResidualStreamPrecision, keras.layers.Layer):
    """x + attention(norm(x)), then + GeGLU(norm(x)) (Warner et al., 2024).

    Every projection and LayerNorm is without bias. The attention rotates
    queries and keys (`rotary_theta`) and, on a local layer, sees only the
    tokens within `window` positions (`MultiHeadSelfAttention`'s
    sliding-window mode, linear in T). The first layer has no attention
    LayerNorm: the embedding's LayerNorm has just normalised its input,
    which is why the published checkpoints hold no `layers.0.attn_norm`.

    Args:
        num_heads: int.
        intermediate_dim: int. Width of each half of the gated projection.
        rotary_theta: float. The rotary base (160,000 global, 10,000 local).
        window: int or None. The half-width of a local layer's window
            (local_attention // 2); None: a global layer.
        query_chunk: int or None. A global layer's memory-efficient
            attention: queries in chunks of this many above that length
            (`MultiHeadSelfAttention`'s `query_chunk`); None: plain.
        first: bool. The first layer (no attention LayerNorm).
        dropout: float. Attention probabilities, both branch outputs and
            the gated product (0 in the published models).
        layer_norm_epsilon: float.
        initializer_range: float.
        activation: str. The feed-forward's ("gelu": exact GELU, GeGLU).

    Call args:
        x: float [B, T, H].
        attention_bias: float [B, 1, 1, T], the padding bias.

    Returns:
        float [B, T, H].

    Example:

    >>> import numpy as np
    >>> from kerasbert.models.modernbert.modernbert_block import ModernBertBlock
    >>> block = ModernBertBlock(num_heads=2, intermediate_dim=6, rotary_theta=10000.0, window=2)
    >>> tuple(block(np.zeros((1, 7, 4), "float32")).shape)   # [B, T, H]
    (1, 7, 4)
    """

    def __init__(self, num_heads, intermediate_dim, rotary_theta, window=None, first=False,
                 dropout=0.0, layer_norm_epsilon=1e-5, initializer_range=0.02,
                 activation="gelu", query_chunk=None, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.rotary_theta = float(rotary_theta)
        self.window = int(window) if window else None
        self.first = bool(first)
        self.query_chunk = int(query_chunk) if query_chunk and not self.window else None
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.activation = activation
        self.attention_layer_norm = None if self.first else self._norm("attention_layer_norm")
        self.attention = MultiHeadSelfAttention(
            num_heads, dropout=dropout, initializer_range=initializer_range, use_bias=False,
            rotary_theta=rotary_theta, window=window, query_chunk=self.query_chunk,
            dtype=self.dtype_policy,
            name="attention")
        self.attention_dropout = FastDropout(dropout, dtype=self.stream_policy,
                                             name="attention_output_dropout")
        self.feed_forward_layer_norm = self._norm("feed_forward_layer_norm")
        self.feed_forward = GatedFeedForward(
            intermediate_dim, activation=activation, use_bias=False, dropout=dropout,
            initializer_range=initializer_range, dtype=self.dtype_policy, name="feed_forward")

    def _norm(self, name):
        return keras.layers.LayerNormalization(epsilon=self.layer_norm_epsilon, center=False,
                                               dtype=self.stream_policy, name=name)

    def build(self, x_shape, *args, **kwargs):
        for layer in (self.attention_layer_norm, self.attention, self.feed_forward_layer_norm,
                      self.feed_forward):
            if layer is not None:
                layer.build(x_shape)
        self.built = True

    def call(self, x, attention_bias=None, training=None):
        normed = x if self.first else self.attention_layer_norm(x)
        attended = self.attention(normed, attention_bias=attention_bias, training=training)
        x = x + self.attention_dropout(attended, training=training)
        fed = self.feed_forward(self.feed_forward_layer_norm(x), training=training)
        return x + ops.cast(fed, x.dtype)

    def attention_probabilities(self, x, attention_bias=None):
        """float32 [B, N, T, T]: what the attention gives each key (0
        outside a local layer's window), as `call` normalises its input."""
        normed = x if self.first else self.attention_layer_norm(x)
        return self.attention(normed, attention_bias=attention_bias, training=False,
                              return_attention_scores=True)[1]

    def compute_output_shape(self, x_shape, *args, **kwargs):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads, "intermediate_dim": self.intermediate_dim,
            "rotary_theta": self.rotary_theta, "window": self.window, "first": self.first,
            "dropout": self.dropout, "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer_range": self.initializer_range, "activation": self.activation,
        })
        if self.query_chunk:
            config["query_chunk"] = self.query_chunk
        return config
