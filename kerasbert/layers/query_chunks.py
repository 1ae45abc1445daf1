"""Exact softmax attention over all keys with the queries taken in chunks,
and a backward pass that recomputes each chunk's scores: training memory
O(chunk x S) per head instead of the [B, N, T, S] scores, their softmax and
their gradients (Rabe & Staats, 2021; FlashAttention's backward, Dao et
al., 2022).

Forward, chunk by chunk (`ops.scan`, one chunk at a time on every
backend): scores in float32, their log-sum-exp (kept: [B, N, T], one number
per query and head) and the attended values. Backward, chunk by chunk: the
probabilities again from the scores and the kept log-sum-exp, then

    dV += P^T dO,  dS = P * (dO V^T - rowsum(dO * O)),  dQ = dS K,  dK += dS^T Q

so no [T, S] tensor outlives its chunk. The gradient is written with
`kernels.custom_gradient` (Keras's under JAX; under TensorFlow one that no
graph outlives), so the same code trains under TensorFlow and JAX. The
result equals the plain computation up to float rounding.
"""

from keras import ops

from kerasbert.kernels import custom_gradient


def query_chunked_attention(query, key, value, key_bias, chunk):
    """Attention of every query over every key, `chunk` queries at a time.

    Args:
        query: [B, T, N, D], already scaled; key, value: [B, S, N, D].
        key_bias: float [B, S] added to every query's scores (the padding
            bias's last axis), or None. It gets no gradient.
        chunk: int >= 1, queries per chunk (T is padded up to a multiple).

    Returns:
        [B, T, N, D], the attended values (before the output projection).
    """
    shape = ops.shape(query)
    batch, length = shape[0], shape[1]
    heads, depth = query.shape[2], query.shape[3]
    num_chunks = (length + chunk - 1) // chunk
    if key_bias is None:
        key_bias = ops.zeros(ops.shape(key)[:2], "float32")
    query = ops.pad(query, [[0, 0], [0, num_chunks * chunk - length], [0, 0], [0, 0]])
    chunks = ops.moveaxis(ops.reshape(query, (batch, num_chunks, chunk, heads, depth)), 1, 0)
    out = _attend_chunks(chunks, key, value, ops.cast(key_bias, "float32"))
    out = ops.reshape(ops.moveaxis(out, 0, 1), (batch, num_chunks * chunk, heads, depth))
    return out[:, :length]


def _scores(query, key, key_bias):
    """float32 [B, N, c, S] scores of one chunk of queries [B, c, N, D]."""
    scores = ops.cast(ops.einsum("bqnd,bsnd->bnqs", query, key), "float32")
    return scores + key_bias[:, None, None, :]


@custom_gradient
def _attend_chunks(chunks, key, value, key_bias):
    """chunks [n, B, c, N, D] -> [n, B, c, N, D]; see the module's text."""

    def forward(carry, query):
        scores = _scores(query, key, key_bias)
        top = ops.max(scores, axis=-1, keepdims=True)  # [B, N, c, 1]
        weights = ops.exp(scores - top)  # one exponent pass; normalised after the product
        total = ops.sum(weights, axis=-1, keepdims=True)
        out = ops.einsum("bnqs,bsnd->bqnd", ops.cast(weights, value.dtype), value)
        out = out / ops.cast(ops.expand_dims(ops.moveaxis(total[..., 0], 1, 2), -1), out.dtype)
        return (out, top + ops.log(total)), (out, top + ops.log(total))

    first = chunks[0]
    lse_shape = (ops.shape(first)[0], first.shape[2], first.shape[1], 1)
    init = (ops.zeros_like(first), ops.zeros(lse_shape, "float32"))
    _, (out, lse) = ops.scan(forward, init, chunks)

    def grad(*args, upstream=None):
        d_out = ops.cast(args[0] if upstream is None else upstream, "float32")
        # rowsum(dO * O) = rowsum(dP * P), per query and head: [n, B, N, c, 1]
        delta = ops.moveaxis(ops.sum(d_out * ops.cast(out, "float32"), axis=-1), -1, -2)
        key32, value32 = ops.cast(key, "float32"), ops.cast(value, "float32")

        def backward(carry, index):
            d_key, d_value, d_chunks = carry
            # One scanned array (Keras' TensorFlow scan fails on several
            # when their length is unknown); the chunk's slices by index.
            query, d_o, lse_c, delta_c = (ops.take(t, index, axis=0)
                                          for t in (chunks, d_out, lse, delta))
            probs = ops.exp(_scores(query, key, key_bias) - lse_c)
            d_value = d_value + ops.einsum("bnqs,bqnd->bsnd", probs, d_o)
            d_scores = probs * (ops.einsum("bqnd,bsnd->bnqs", d_o, value32) - delta_c[..., None])
            d_query = ops.einsum("bnqs,bsnd->bqnd", d_scores, key32)
            d_key = d_key + ops.einsum("bnqs,bqnd->bsnd", d_scores, ops.cast(query, "float32"))
            # Written by a select, not `ops.slice_update`: TensorFlow's slice
            # update is an XLA op, which a stock TF Serving binary cannot run,
            # and an exported graph keeps this gradient function. (A stacked
            # scan output fails in Keras' TensorFlow scan at unknown lengths.)
            here = ops.reshape(ops.arange(ops.shape(d_chunks)[0]) == index, (-1, 1, 1, 1, 1))
            d_chunks = ops.where(here, d_query[None], d_chunks)
            return (d_key, d_value, d_chunks), None

        init = (ops.zeros_like(key32), ops.zeros_like(value32),
                ops.zeros_like(ops.cast(chunks, "float32")))
        indices = ops.arange(ops.shape(chunks)[0], dtype="int32")
        (d_key, d_value, d_chunks), _ = ops.scan(backward, init, indices)
        return (ops.cast(d_chunks, chunks.dtype), ops.cast(d_key, key.dtype),
                ops.cast(d_value, value.dtype), ops.zeros_like(key_bias))

    return out, grad
