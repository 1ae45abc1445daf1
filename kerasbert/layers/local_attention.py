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

from kerasbert.layers.chunked_attention import ChunkedSelfAttention
from kerasbert.layers.chunked_attention import merge_heads
from kerasbert.layers.chunked_attention import pad_to_chunks
from kerasbert.layers.chunked_attention import split_heads


@keras.saving.register_keras_serializable(package="kerasbert")
class LocalSelfAttention(ChunkedSelfAttention):
    """Chunked local self-attention (the arguments of ChunkedSelfAttention).

    Call args:
        x: float [B, T, H].
        padding_mask: int/bool [B, T], 1 for real tokens, or None.

    Returns:
        float [B, T, H].

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import LocalSelfAttention
    >>> x = np.zeros((2, 8, 8), "float32")                    # [B, T, H]
    >>> mask = np.array([[1] * 8, [1] * 5 + [0] * 3])         # [B, T]
    >>> attention = LocalSelfAttention(num_heads=2, chunk_length=4, num_chunks_before=1)
    >>> tuple(attention(x, padding_mask=mask).shape)          # a chunk sees itself and the one before
    (2, 8, 8)
    """

    def build_projections(self, x_shape, initializer):
        self.query_dense = self.projection(x_shape, initializer, "query")
        self.key_dense = self.projection(x_shape, initializer, "key")
        self.value_dense = self.projection(x_shape, initializer, "value")

    def call(self, x, padding_mask=None, training=None):
        length = ops.shape(x)[1]
        x_in, valid, padded = pad_to_chunks(x, padding_mask, self.chunk_length)
        batch = ops.shape(x_in)[0]
        q, k, v = (split_heads(dense(x_in), self.num_heads)
                   for dense in (self.query_dense, self.key_dense, self.value_dense))
        positions = ops.broadcast_to(ops.arange(padded, dtype="int32"),
                                     (batch, self.num_heads, padded))
        key_valid = ops.broadcast_to(ops.reshape(valid, (batch, 1, padded)),
                                     (batch, self.num_heads, padded))
        out, _ = self.attend(q * ops.cast(1.0 / math.sqrt(self.head_dim), q.dtype), k, v,
                             positions, positions, key_valid, training, window_only=True)
        return self.output_dense(merge_heads(out)[:, :length])
