"""A decoder layer with cross-attention (the Transformer's decoder block)."""

import keras
from keras import ops

from kerasbert.layers.attention_bias import MASK_BIAS
from kerasbert.layers.attention import MultiHeadCrossAttention
from kerasbert.layers.attention import MultiHeadSelfAttention
from kerasbert.layers.initializers import bert_initializer
from kerasbert.layers.transformer_block_base import TransformerBlockBase


def step_attention_bias(index, cache_length):
    """[1, 1, 1, L] float32 bias for a cached decoding step at `index`:
    0 on the cache rows 0..index (written so far), `MASK_BIAS` after."""
    rows = ops.arange(cache_length, dtype="int32")
    return ops.reshape(ops.where(rows <= index, 0.0, MASK_BIAS), (1, 1, 1, cache_length))


@keras.saving.register_keras_serializable(package="kerasbert")
class TransformerDecoderBlock(TransformerBlockBase):
    """One decoder layer (Vaswani et al., 2017, section 3.1): causal
    self-attention, attention to the encoder's output, feed-forward; each
    sub-layer with dropout and a residual add, LayerNorm after the add
    (post-LN, the paper) or before the branch (`norm_first`, tensor2tensor
    and Model Garden)::

        post-LN: x = LN(x + Dropout(SelfAttention(x)))
                 x = LN(x + Dropout(CrossAttention(x, memory)))
                 x = LN(x + Dropout(W_2 act(W_1 x)))
        pre-LN:  x = x + Dropout(SelfAttention(LN(x))), and so on.

    The attention layers are the shared `MultiHeadSelfAttention` and
    `MultiHeadCrossAttention`; the feed-forward is the encoder block's
    (Dense `intermediate` with the activation, Dense `output`).

    Args:
        num_heads: int.
        intermediate_dim: int. Feed-forward width (2048 in the base model).
        activation: str, "relu" (the paper); any name of
            `kerasbert.layers.activations`.
        dropout: float, on each sub-layer's output and the attention
            probabilities.
        layer_norm_epsilon: float.
        initializer_range: float, stddev of the kernels' truncated normal.
        norm_first: bool, pre-LN (see above).
        use_bias: bool. Biases on the attention projections (False: the
            paper's W^Q, W^K, W^V, W^O); the feed-forward always has them.

    Call args:
        x: float [B, T, H], the target-side states.
        memory: float [B, S, H], the encoder's output.
        self_attention_bias: float broadcastable to [B, N, T, T], e.g.
            `causal_attention_bias(decoder_padding_mask)`.
        cross_attention_bias: float broadcastable to [B, N, T, S], e.g.
            `padding_mask_to_attention_bias(encoder_padding_mask)`.

    Returns:
        float [B, T, H].

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import TransformerDecoderBlock, causal_attention_bias
    >>> block = TransformerDecoderBlock(num_heads=2, intermediate_dim=16)
    >>> x = np.zeros((2, 3, 8), "float32")                    # target side [B, T, H]
    >>> memory = np.ones((2, 5, 8), "float32")                # encoder output [B, S, H]
    >>> bias = causal_attention_bias(np.ones((2, 3), "int32"))
    >>> tuple(block(x, memory, self_attention_bias=bias).shape)   # [B, T, H]
    (2, 3, 8)
    """

    def __init__(self, num_heads, intermediate_dim, activation="relu", dropout=0.1,
                 layer_norm_epsilon=1e-6, initializer_range=0.02, norm_first=False,
                 use_bias=False, **kwargs):
        super().__init__(num_heads, intermediate_dim, activation, dropout, layer_norm_epsilon,
                         initializer_range, norm_first, use_bias, **kwargs)

    def build(self, x_shape, memory_shape=None, *args, **kwargs):
        init = bert_initializer(self.initializer_range)
        attention = dict(dropout=self.dropout, initializer_range=self.initializer_range,
                         use_bias=self.use_bias, dtype=self.dtype_policy)
        self.self_attention = MultiHeadSelfAttention(self.num_heads, name="self_attention",
                                                     **attention)
        self.self_attention_dropout = self._dropout("self_attention_dropout")
        self.self_attention_layer_norm = self._layer_norm("self_attention_layer_norm")
        self.cross_attention = MultiHeadCrossAttention(self.num_heads, name="cross_attention",
                                                       **attention)
        self.cross_attention_dropout = self._dropout("cross_attention_dropout")
        self.cross_attention_layer_norm = self._layer_norm("cross_attention_layer_norm")
        self._make_feed_forward(x_shape[-1], init)
        for layer in (self.self_attention, self.self_attention_layer_norm,
                      self.cross_attention, self.cross_attention_layer_norm):
            layer.build(x_shape)
        self._build_feed_forward(x_shape)
        self.built = True

    def _sublayer(self, x, branch, dropout, norm, training):
        """One residual sub-layer, post-LN or pre-LN."""
        if self.norm_first:
            return x + dropout(branch(norm(x)), training=training)
        return norm(x + dropout(branch(x), training=training))

    def call(self, x, memory, self_attention_bias=None, cross_attention_bias=None,
             training=None):
        x = self._sublayer(
            x, lambda h: self.self_attention(h, self_attention_bias, training=training),
            self.self_attention_dropout, self.self_attention_layer_norm, training)
        x = self._sublayer(
            x, lambda h: self.cross_attention(h, memory, cross_attention_bias,
                                              training=training),
            self.cross_attention_dropout, self.cross_attention_layer_norm, training)
        return self._sublayer(x, self._feed_forward, self.output_dropout,
                              self.output_layer_norm, training)

    def decode_step(self, x, index, key_cache, value_cache, memory_heads,
                    cross_attention_bias=None):
        """One position of incremental decoding (inference: no dropout).

        The new token's key and value are written at row `index` of the
        fixed-size caches, and the token attends to rows 0..index: the same
        result as `call` on the whole prefix at that position, with shapes
        that stay the same at every step (a `while_loop` carries them).

        Args:
            x: float [B, 1, H], the step's input states.
            index: int32 scalar, the step's position.
            key_cache, value_cache: [B, L, N, D], rows < index filled.
            memory_heads: (key, value) of the encoder output, each
                [B, S, N, D] (`cross_attention.project_memory`).
            cross_attention_bias: [B, 1, 1, S] or None.

        Returns:
            (float [B, 1, H], key_cache, value_cache) with row `index` set.
        """
        caches = [key_cache, value_cache]
        # Called directly, not through `__call__`: cast to the residual
        # stream's dtype here (float32 under a mixed policy).
        x = ops.cast(x, self.input_dtype)

        def self_attend(h):
            query, key, value = self.self_attention.project(h)
            # Row `index` set by a select over the length axis, not
            # `ops.slice_update`: TensorFlow's is XlaDynamicUpdateSlice,
            # an op TF Serving builds need not register; SelectV2 is core.
            row = ops.reshape(ops.equal(ops.arange(ops.shape(caches[0])[1]), index),
                              (1, -1, 1, 1))
            caches[0] = ops.where(row, ops.cast(key, caches[0].dtype), caches[0])
            caches[1] = ops.where(row, ops.cast(value, caches[1].dtype), caches[1])
            bias = step_attention_bias(index, ops.shape(caches[0])[1])
            return self.self_attention.attend(query, caches[0], caches[1], bias)

        x = self._sublayer(x, self_attend, self.self_attention_dropout,
                           self.self_attention_layer_norm, False)
        x = self._sublayer(
            x, lambda h: self.cross_attention(h, None, cross_attention_bias,
                                              memory_heads=memory_heads),
            self.cross_attention_dropout, self.cross_attention_layer_norm, False)
        x = self._sublayer(x, self._feed_forward, self.output_dropout,
                           self.output_layer_norm, False)
        return x, caches[0], caches[1]

    def compute_output_shape(self, x_shape, *args, **kwargs):
        return x_shape

    def get_config(self):
        return {
            **super().get_config(),
            **self._options_config(),
            "norm_first": self.norm_first,
            "use_bias": self.use_bias,
        }
