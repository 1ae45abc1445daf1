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

from keras import ops

from kerasbert.layers.attention import MASK_BIAS

# A token's score for itself under shared query/key attention (its query is
# its key, so it would always win): below any real score, above MASK_BIAS,
# so it is chosen only when every other key is masked.
SELF_BIAS = -1.0e4


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

    lse = ops.logsumexp(scores, axis=-1, keepdims=True)
    probs = ops.exp(scores - lse)
    if dropout is not None:
        probs = dropout(probs, training=training)
    out = ops.einsum("bnxij,bnxjd->bnxid", ops.cast(probs, value.dtype), v)
    return (ops.reshape(out, (batch, heads, length, depth)),
            ops.reshape(lse, (batch, heads, length)))
