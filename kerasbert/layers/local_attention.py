"""The Reformer's local self-attention: chunks of the sequence itself.

Queries, keys and values have their own projections (no sharing, so no
rule against attending to oneself). The sequence is cut into chunks of
`chunk_length`; each attends to its own chunk and `num_chunks_before` /
`num_chunks_after` neighbours (kerasbert.layers.chunked_attention), with
causal and padding masks by position. Unlike the LSH layer's sorted
buckets, a chunk that wraps around the sequence's ends is masked: local
means near. Cost O(T * chunk_length * (1 + before + after)).
"""

import math

import keras
from keras import ops

from kerasbert.layers.chunked_attention import chunked_attention
from kerasbert.layers.initializers import bert_initializer


@keras.saving.register_keras_serializable(package="kerasbert")
class LocalSelfAttention(keras.layers.Layer):
    """Chunked local self-attention.

    Args:
        num_heads: int.
        chunk_length: int, tokens per chunk.
        num_chunks_before, num_chunks_after: neighbouring chunks attended.
        causal: bool.
        dropout: float, on the attention probabilities.
        initializer_range: float.

    Call args:
        x: float [B, T, H].
        padding_mask: int/bool [B, T], 1 for real tokens, or None.

    Returns:
        float [B, T, H].
    """

    def __init__(self, num_heads, chunk_length=64, num_chunks_before=1, num_chunks_after=0,
                 causal=False, dropout=0.0, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.chunk_length = chunk_length
        self.num_chunks_before = num_chunks_before
        self.num_chunks_after = num_chunks_after
        self.causal = causal
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)

    def build(self, x_shape, padding_mask_shape=None):
        hidden = x_shape[-1]
        if hidden % self.num_heads:
            raise ValueError(f"hidden_dim {hidden} is not divisible by num_heads "
                             f"{self.num_heads}.")
        self.head_dim = hidden // self.num_heads
        init = bert_initializer(self.initializer_range)
        self.qkv_dense = keras.layers.Dense(3 * hidden, kernel_initializer=init, use_bias=False,
                                            dtype=self.dtype_policy, name="qkv")
        self.output_dense = keras.layers.Dense(hidden, kernel_initializer=init,
                                               dtype=self.dtype_policy, name="attention_output")
        self.qkv_dense.build(x_shape)
        self.output_dense.build(x_shape)
        self.built = True

    def call(self, x, padding_mask=None, training=None):
        shape = ops.shape(x)
        batch, length = shape[0], shape[1]
        if padding_mask is None:
            padding_mask = ops.ones((batch, length), "int32")
        padded = ((length + self.chunk_length - 1) // self.chunk_length) * self.chunk_length
        extra = padded - length
        x_in = ops.pad(x, [[0, 0], [0, extra], [0, 0]])
        valid = ops.pad(ops.cast(padding_mask, "bool"), [[0, 0], [0, extra]])
        heads = (batch, padded, self.num_heads, self.head_dim)
        q, k, v = (ops.transpose(ops.reshape(t, heads), (0, 2, 1, 3))
                   for t in ops.split(self.qkv_dense(x_in), 3, axis=-1))
        positions = ops.broadcast_to(ops.arange(padded, dtype="int32"),
                                     (batch, self.num_heads, padded))
        key_valid = ops.broadcast_to(ops.reshape(valid, (batch, 1, padded)),
                                     (batch, self.num_heads, padded))
        out, _ = chunked_attention(
            q * ops.cast(1.0 / math.sqrt(self.head_dim), q.dtype), k, v, positions, positions,
            key_valid, chunk_length=self.chunk_length, num_chunks_before=self.num_chunks_before,
            num_chunks_after=self.num_chunks_after, causal=self.causal, window_only=True,
            dropout=self.dropout_layer, training=training)
        out = ops.reshape(ops.transpose(out, (0, 2, 1, 3)),
                          (batch, padded, self.num_heads * self.head_dim))
        return self.output_dense(out[:, :length])

    def compute_output_shape(self, x_shape, padding_mask_shape=None):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads, "chunk_length": self.chunk_length,
            "num_chunks_before": self.num_chunks_before,
            "num_chunks_after": self.num_chunks_after, "causal": self.causal,
            "dropout": self.dropout, "initializer_range": self.initializer_range,
        })
        return config
