"""Dense numpy attention for checking the chunked layers against: every
score formed, masked, soft-maxed; written from the definitions, not from
the layers' code."""

import numpy as np

from kerasbert.layers.attention_bias import MASK_BIAS
from kerasbert.layers.chunked_attention import SELF_BIAS


def dense_attention(scores, allowed, values, output_dense, own=None):
    """scores [B, N, T, S], allowed bool (broadcastable), values
    [B, N, S, d]; `own` marks each query's own key (allowed only when
    nothing else is). Returns the output projection of the context
    [B, T, N * d]."""
    scores = np.where(allowed, scores, MASK_BIAS)
    if own is not None:
        scores = np.where(own & allowed, SELF_BIAS, scores)
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    context = np.einsum("bnts,bnsd->bntd", probs, values)
    b, n, t, d = context.shape
    context = context.transpose(0, 2, 1, 3).reshape(b, t, n * d)
    out = context @ np.asarray(output_dense.kernel)
    return out if output_dense.bias is None else out + np.asarray(output_dense.bias)
