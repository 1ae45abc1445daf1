"""Which layers keep float32 when a model trains in mixed precision.

Under a mixed policy ("mixed_bfloat16", "mixed_float16": float32 variables,
half-precision products) the encoder blocks keep their residual stream in
float32: each LayerNorm, the dropout before each residual add and the
dropout of the attention probabilities run in float32, and a projection
casts its input to half precision where it reads the stream (Keras casts a
layer's inputs to its compute dtype). This is what PyTorch's autocast does,
whose LayerNorm returns float32.

Why: those layers are elementwise work that half precision does not speed
up on a CPU (TensorFlow's bfloat16 random draw took 1.7x and its select
2.6x as long as in float32 on AVX512_BF16), while the products they feed
cast their inputs either way, so the stream costs no extra cast. Measured on
the 2-core AVX512_BF16 VM, one process, medians of interleaved blocks:
the bert_mini pretraining step (batch 16, T 128) 201 -> 188 ms and 195 -> 176
ms in two runs (float32: 241 and 233 ms), the all-MiniLM-L6-v2 fine-tuning
step (batch 32, T 40) 296 -> 276 ms (float32: 364 ms); float32 itself is
unchanged. The sums of the residual adds are also exact to float32
rather than rounded to bfloat16's 8 bits at every layer.

A model whose policy stores its weights in half precision ("bfloat16", what
`export --precision bfloat16` serves) computes everything in that dtype:
there is no float32 to keep.
"""

import keras


def full_precision_policy(policy):
    """The dtype policy of a block's LayerNorms and dropouts.

    Args:
        policy: a `keras.DTypePolicy` (or its name): the block's.

    Returns:
        The "float32" policy when `policy` computes in a narrower dtype than
        it stores its variables in (a mixed policy); else `policy` itself.
    """
    policy = keras.dtype_policies.get(policy)
    if policy.compute_dtype != policy.variable_dtype:
        return keras.dtype_policies.get("float32")
    return policy


class ResidualStreamPrecision:
    """Mixin for a block with a residual stream: Keras casts the block's
    inputs to `stream_policy`'s compute dtype (float32 under a mixed policy)
    instead of the compute dtype. The block makes its LayerNorms and the
    dropouts before its residual adds with `stream_policy` too, and casts a
    branch computed in half precision before adding it."""

    @property
    def stream_policy(self):
        """`full_precision_policy` of the block's policy."""
        return full_precision_policy(self.dtype_policy)

    @property
    def input_dtype(self):
        return self.stream_policy.compute_dtype
