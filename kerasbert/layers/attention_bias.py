"""The additive attention biases every attention layer takes: padding and
causal masks as float32 numbers added to the scores, built once per forward
pass and shared by every layer."""

from keras import ops

# Large but finite: exp(-30000) is exactly 0 in float32, and the value (plus
# any realistic score) still fits in float16 (max 65504), so a fully padded
# row gives a uniform distribution instead of NaN.
MASK_BIAS = -3.0e4


def padding_mask_to_attention_bias(padding_mask):
    """Converts a [B, T] 0/1 padding mask into a [B, 1, 1, T] float32 bias.

    Positions with mask 1 get 0, positions with mask 0 get `MASK_BIAS`. The
    bias broadcasts over heads and query positions.
    """
    mask = ops.cast(padding_mask, "float32")
    bias = (1.0 - mask) * MASK_BIAS
    return ops.expand_dims(ops.expand_dims(bias, 1), 1)


def causal_attention_bias(padding_mask):
    """A [B, 1, T, T] float32 bias for causal (decoder) self-attention.

    Query t may attend to key s only when s <= t AND key s is a real token
    (mask 1); every other entry is `MASK_BIAS`. The two conditions are
    combined with a minimum, not a sum, so a fully padded row stays at
    `MASK_BIAS` (no -6e4 that float16 could not hold) and softmaxes to a
    finite, uniform distribution instead of NaN.

    Args:
        padding_mask: int [B, T], 1 for real tokens.

    Returns:
        float32 [B, 1, T, T], broadcast over heads.
    """
    padding = padding_mask_to_attention_bias(padding_mask)  # [B, 1, 1, T]
    # Positions from a cumulative sum rather than arange(T): T may be
    # unknown while a functional graph is built.
    positions = ops.cumsum(ops.ones_like(padding_mask, dtype="int32"), axis=1)
    # future[b, t, s] is True when key s comes after query t.
    future = ops.greater(
        ops.expand_dims(positions, 1), ops.expand_dims(positions, 2)
    )
    causal = ops.cast(future, "float32") * MASK_BIAS  # [B, T, T]
    return ops.minimum(padding, ops.expand_dims(causal, 1))
