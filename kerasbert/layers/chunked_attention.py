"""Attention inside chunks: the shared core of the Reformer's attentions.

A sequence of L items (L a multiple of `chunk_length` C) is cut into L / C
chunks; the queries of a chunk attend to the keys of their own chunk and of
`num_chunks_before` / `num_chunks_after` neighbouring chunks (wrapping
around the ends, as the Reformer does, where masks remove what must not be
seen). Work and memory are O(L * C * (1 + before + after)): no [L, L]
tensor. LSH attention runs it on items sorted by hash bucket, local
attention on the sequence itself.

Every item carries its sequence position, so the masks are exact whatever
the order: a padded key, a later key under `causal`, and (for shared
query/key attention) the query's own position, which is only allowed when
the query has nothing else to attend to.
"""

import keras
from keras import ops

from kerasbert.layers.attention_bias import MASK_BIAS
from kerasbert.layers.fast_dropout import FastDropout
from kerasbert.layers.fused_dense import FusedDense
from kerasbert.layers.initializers import bert_initializer

# A token's score for itself under shared query/key attention (its query is
# its key, so it would always win): below any real score, above MASK_BIAS,
# so it is chosen only when every other key is masked.
SELF_BIAS = -1.0e4


def pad_to_chunks(x, padding_mask, chunk_length):
    """Pads [B, T, H] inputs to T' = a multiple of chunk_length.

    Returns:
        (x [B, T', H], valid bool [B, T'] (False for padding and the added
        positions), T')."""
    shape = ops.shape(x)
    batch, length = shape[0], shape[1]
    if padding_mask is None:
        padding_mask = ops.ones((batch, length), "int32")
    padded = ((length + chunk_length - 1) // chunk_length) * chunk_length
    extra = padded - length
    x = ops.pad(x, [[0, 0], [0, extra], [0, 0]])
    valid = ops.pad(ops.cast(padding_mask, "bool"), [[0, 0], [0, extra]])
    return x, valid, padded


def split_heads(x, num_heads):
    """[B, T, N * d] -> [B, N, T, d]."""
    shape = ops.shape(x)
    return ops.transpose(ops.reshape(x, (shape[0], shape[1], num_heads, -1)), (0, 2, 1, 3))


def merge_heads(x):
    """[B, N, T, d] -> [B, T, N * d]."""
    shape = ops.shape(x)
    return ops.reshape(ops.transpose(x, (0, 2, 1, 3)), (shape[0], shape[2], shape[1] * shape[3]))


def look_adjacent(x, before, after):
    """[B, N, n, C, ...] chunks -> [B, N, n, C * (before + 1 + after), ...]:
    row i holds chunks i - before, ..., i, ..., i + after (indices modulo n)
    concatenated along the item axis."""
    if before == 0 and after == 0:
        return x
    parts = [ops.roll(x, shift=-offset, axis=2) for offset in range(-before, after + 1)]
    return ops.concatenate(parts, axis=3)


def chunked_attention(query, key, value, query_positions, key_positions, key_valid, *,
                      chunk_length, num_chunks_before=1, num_chunks_after=0, causal=False,
                      mask_self=False, window_only=False, dropout=None, training=None):
    """Attention of every query to the keys of its chunk and its neighbours.

    Args:
        query, key: float [B, N, L, d] (any scaling already applied).
        value: float [B, N, L, d].
        query_positions, key_positions: int [B, N, L], sequence positions.
        key_valid: bool [B, N, L], False for padding.
        chunk_length: int C, L % C == 0.
        mask_self: mask a query's own position (SELF_BIAS), shared-QK.
        window_only: mask keys whose chunk wrapped around the ends (local
            attention on the sequence's own order, where a wrapped chunk is
            far away).
        dropout: a Dropout layer for the probabilities, or None.

    Returns:
        (output [B, N, L, d] in value's dtype, logsumexp [B, N, L] float32
        of each query's masked scores: LSH combines hash rounds with it).
    """
    shape = ops.shape(query)
    batch, heads, length, depth = shape[0], shape[1], shape[2], shape[3]
    n = length // chunk_length
    chunks = (batch, heads, n, chunk_length)
    q = ops.reshape(query, chunks + (depth,))
    k = look_adjacent(ops.reshape(key, chunks + (depth,)), num_chunks_before, num_chunks_after)
    v = look_adjacent(ops.reshape(value, chunks + (depth,)), num_chunks_before,
                      num_chunks_after)
    scores = ops.cast(ops.einsum("bnxid,bnxjd->bnxij", q, k), "float32")

    q_pos = ops.expand_dims(ops.reshape(query_positions, chunks), -1)  # [B,N,n,C,1]
    k_pos = ops.expand_dims(look_adjacent(ops.reshape(key_positions, chunks),
                                          num_chunks_before, num_chunks_after), 3)
    valid = ops.expand_dims(look_adjacent(ops.reshape(key_valid, chunks), num_chunks_before,
                                          num_chunks_after), 3)  # [B,N,n,1,K]
    if causal:
        valid = ops.logical_and(valid, ops.less_equal(k_pos, q_pos))
    if window_only:
        q_chunk = q_pos // chunk_length
        k_chunk = k_pos // chunk_length
        valid = ops.logical_and(valid, ops.logical_and(
            ops.greater_equal(k_chunk, q_chunk - num_chunks_before),
            ops.less_equal(k_chunk, q_chunk + num_chunks_after)))
    scores = ops.where(valid, scores, MASK_BIAS)
    if mask_self:
        own = ops.logical_and(ops.equal(k_pos, q_pos), valid)
        scores = ops.where(own, SELF_BIAS, scores)

    # Probabilities from the max-shifted exponentials, not exp(scores -
    # logsumexp): where only the own position is left (SELF_BIAS, -1e4) the
    # logsumexp sits near -1e4, where float32 steps are 1e-3, and the
    # probabilities would be off by that much.
    top = ops.max(scores, axis=-1, keepdims=True)
    shifted = ops.exp(scores - top)
    total = ops.sum(shifted, axis=-1, keepdims=True)
    probs = shifted / total
    lse = top + ops.log(total)
    if dropout is not None:
        probs = dropout(probs, training=training)
    out = ops.einsum("bnxij,bnxjd->bnxid", ops.cast(probs, value.dtype), v)
    return (ops.reshape(out, (batch, heads, length, depth)),
            ops.reshape(lse, (batch, heads, length)))


class ChunkedSelfAttention(keras.layers.Layer):
    """What the Reformer's attentions share: their chunk settings (the
    config), the head split and the output projection. Every subclass
    defines `build_projections(x_shape, initializer)` (its input
    projections, which `build` calls) and `call`.

    Args:
        num_heads: int.
        chunk_length: int, items per attention chunk.
        num_chunks_before, num_chunks_after: neighbouring chunks attended.
        causal: bool, a position never attends to a later one.
        dropout: float, on the attention probabilities.
        initializer_range: float.
        head_dim: int or None, the width of each head's projections (None:
            hidden_dim / num_heads; the Reformer checkpoints use other
            widths, e.g. 2 heads of 64 on a 256-wide stream).
    """

    def __init__(self, num_heads, chunk_length=64, num_chunks_before=1, num_chunks_after=0,
                 causal=False, dropout=0.0, initializer_range=0.02, head_dim=None, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.head_size = head_dim
        self.chunk_length = chunk_length
        self.num_chunks_before = num_chunks_before
        self.num_chunks_after = num_chunks_after
        self.causal = causal
        self.dropout = dropout
        self.initializer_range = initializer_range
        self.dropout_layer = FastDropout(dropout, dtype=self.dtype_policy)

    def build(self, x_shape, padding_mask_shape=None):
        hidden = x_shape[-1]
        if self.head_size is None and hidden % self.num_heads:
            raise ValueError(f"hidden_dim {hidden} is not divisible by num_heads "
                             f"{self.num_heads}.")
        self.head_dim = self.head_size or hidden // self.num_heads
        init = bert_initializer(self.initializer_range)
        self.build_projections(x_shape, init)
        # No biases anywhere in the Reformer's attention (nor in its
        # checkpoints): the pre-LayerNorm of the branch supplies the offset.
        self.output_dense = FusedDense(hidden, kernel_initializer=init, use_bias=False,
                                       dtype=self.dtype_policy, name="attention_output")
        self.output_dense.build(tuple(x_shape[:-1]) + (self.num_heads * self.head_dim,))
        self.built = True

    def attend(self, query, key, value, query_positions, key_positions, key_valid, training,
               **masks):
        """chunked_attention with this layer's chunk settings."""
        return chunked_attention(
            query, key, value, query_positions, key_positions, key_valid,
            chunk_length=self.chunk_length, num_chunks_before=self.num_chunks_before,
            num_chunks_after=self.num_chunks_after, causal=self.causal,
            dropout=self.dropout_layer, training=training, **masks)

    def projection(self, x_shape, initializer, name):
        """A bias-free Dense to num_heads * head_dim, built on x_shape."""
        dense = FusedDense(self.num_heads * self.head_dim, use_bias=False,
                           kernel_initializer=initializer, dtype=self.dtype_policy,
                           name=name)
        dense.build(x_shape)
        return dense

    def compute_output_shape(self, x_shape, padding_mask_shape=None):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads, "chunk_length": self.chunk_length,
            "num_chunks_before": self.num_chunks_before,
            "num_chunks_after": self.num_chunks_after, "causal": self.causal,
            "dropout": self.dropout, "initializer_range": self.initializer_range,
            "head_dim": self.head_size,
        })
        return config
