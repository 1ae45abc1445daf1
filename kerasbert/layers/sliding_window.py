"""Sliding-window attention in blocks: each token attends to the tokens
within `window` positions of it (|i - j| <= window, both sides), at a cost
linear in the length.

The sequence is cut into blocks of `window` tokens. Every key a query of
block c may see lies in blocks c - 1, c and c + 1, so each block scores its
`window` queries against those 3 x `window` keys: [B, T / w, N, w, 3w]
scores instead of [B, N, T, T]. A fixed [w, 3w] band keeps the distance
rule exact, and the keys' padding bias masks padding and the blocks added
at both ends. At T = 8,192 and window 64 that is 1/43 of the full matrix.
"""

from keras import ops

from kerasbert.layers.attention_bias import MASK_BIAS


def band_bias(query_positions, key_length, window):
    """Additive float32 bias [B or 1, 1, Q, S]: 0 where |q - s| <= window,
    `MASK_BIAS` elsewhere (the window as a mask on the full matrix, for the
    rare calls that need the full matrix: chosen queries, returned scores).

    Args:
        query_positions: int [B, Q], or None for 0 .. key_length - 1.
        key_length: S.
        window: int, the half-width.
    """
    keys = ops.arange(key_length, dtype="int32")
    if query_positions is None:
        query_positions = ops.expand_dims(keys, 0)
    distance = ops.abs(ops.expand_dims(ops.cast(query_positions, "int32"), -1) - keys)
    bias = ops.where(distance <= window, 0.0, MASK_BIAS)
    return ops.expand_dims(ops.cast(bias, "float32"), 1)


def _key_blocks(x, num_blocks):
    """[B, nb * w, ...] -> [B, nb, 3w, ...]: for block c, blocks c - 1, c,
    c + 1 side by side (`x` already holds one block of filler at each end,
    so it is [B, (nb + 2) * w, ...])."""
    shape = ops.shape(x)
    width = shape[1] // (num_blocks + 2)
    blocks = ops.reshape(x, (shape[0], num_blocks + 2, width) + tuple(shape[2:]))
    return ops.concatenate([blocks[:, :-2], blocks[:, 1:-1], blocks[:, 2:]], axis=2)


def windowed_attention(query, key, value, key_bias, window, dropout_layer=None, training=None):
    """Softmax attention of every position over the positions within
    `window` of it, computed block by block.

    Args:
        query: [B, T, N, D], already scaled; key, value: [B, T, N, D].
        key_bias: float [B, T], 0 for real keys and `MASK_BIAS` for padding
            (the padding bias's last axis), or None.
        window: int >= 1, the half-width (ModernBERT: local_attention // 2).
        dropout_layer: applied to the probabilities.

    Returns:
        [B, T, N, D], the attended values (before the output projection).
    """
    shape = ops.shape(query)
    batch, length = shape[0], shape[1]
    num_blocks = (length + window - 1) // window
    padded = num_blocks * window
    if key_bias is None:
        key_bias = ops.zeros((batch, length), "float32")
    # Pad to whole blocks, then one filler block at each end for the keys.
    tail = padded - length
    query = ops.pad(query, [[0, 0], [0, tail], [0, 0], [0, 0]])
    key = ops.pad(key, [[0, 0], [window, tail + window], [0, 0], [0, 0]])
    value = ops.pad(value, [[0, 0], [window, tail + window], [0, 0], [0, 0]])
    key_bias = ops.pad(ops.cast(key_bias, "float32"), [[0, 0], [window, tail + window]],
                       constant_values=MASK_BIAS)

    query = ops.reshape(query, (batch, num_blocks, window, shape[2], shape[3]))
    key, value = _key_blocks(key, num_blocks), _key_blocks(value, num_blocks)
    scores = ops.cast(ops.einsum("bcqnd,bcknd->bcnqk", query, key), "float32")
    # Query q of a block sits at key index q + window of its 3w keys.
    offsets = ops.arange(3 * window, dtype="int32") - window
    distance = ops.abs(ops.expand_dims(offsets, 0) - ops.expand_dims(ops.arange(window), 1))
    band = ops.where(distance <= window, 0.0, MASK_BIAS)  # [w, 3w]
    keys_bias = _key_blocks(ops.expand_dims(key_bias, -1), num_blocks)[..., 0]  # [B, nb, 3w]
    scores = scores + ops.cast(band, "float32") + ops.expand_dims(ops.expand_dims(keys_bias, 2), 2)
    probs = ops.softmax(scores, axis=-1)
    if dropout_layer is not None:
        probs = dropout_layer(probs, training=training)
    probs = ops.cast(probs, value.dtype)
    context = ops.einsum("bcnqk,bcknd->bcqnd", probs, value)
    context = ops.reshape(context, (batch, padded, shape[2], shape[3]))
    return context[:, :length]
