import keras
import numpy as np
import pytest

from kerasbert.layers import TransformerEncoderBlock
from kerasbert.layers import padding_mask_to_attention_bias
from kerasbert.testing import TestCase

X = np.random.RandomState(1).normal(size=(2, 5, 16)).astype("float32")
MASK = np.array([[1] * 5, [1] * 3 + [0] * 2], "int32")
BIAS = np.asarray(padding_mask_to_attention_bias(MASK))
KWARGS = {"num_heads": 2, "intermediate_dim": 32}


def erf_gelu(x):
    from scipy.special import erf

    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def layer_norm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * gamma + beta


class TestTransformerEncoderBlock(TestCase):
    def test_layer_basics(self):
        self.run_layer_test(
            TransformerEncoderBlock,
            KWARGS,
            X,
            call_kwargs={"attention_bias": BIAS},
            expected_output_shape=(2, 5, 16),
            # qkv, attention output, 2 LayerNorms, 2 feed-forward denses
            expected_num_trainable_weights=12,
        )

    def test_post_layer_norm_with_erf_gelu(self):
        block = TransformerEncoderBlock(**KWARGS, dropout=0.0)
        out = np.asarray(block(X, attention_bias=BIAS))
        attn = np.asarray(block.attention(X, BIAS))
        ln1 = block.attention_layer_norm
        h = layer_norm(X + attn, ln1.gamma.numpy(), ln1.beta.numpy())
        inner = erf_gelu(
            h @ block.intermediate_dense.kernel.numpy()
            + block.intermediate_dense.bias.numpy()
        )
        ffn = inner @ block.output_dense.kernel.numpy() + block.output_dense.bias.numpy()
        ln2 = block.output_layer_norm
        expected = layer_norm(h + ffn, ln2.gamma.numpy(), ln2.beta.numpy())
        np.testing.assert_allclose(out, expected, atol=2e-5)

    def test_padding_mask_convenience_equals_bias(self):
        block = TransformerEncoderBlock(**KWARGS, dropout=0.0)
        a = block(X, attention_bias=BIAS)
        b = block(X, padding_mask=MASK)
        self.assertAllClose(a, b)

    def test_layer_norm_in_float32_survives_large_activations(self):
        # Variance of values ~1000 is ~1e6, beyond float16's 65504: a
        # float16 LayerNorm would overflow to inf/NaN here.
        big = (X * 1000.0).astype("float32")
        block = TransformerEncoderBlock(**KWARGS, dtype="mixed_float16")
        self.assertAllFinite(block(big, attention_bias=BIAS))

    def test_mixed_policy_keeps_the_residual_stream_in_float32(self):
        # Products in bfloat16; LayerNorms, the dropouts and the residual
        # adds in float32 (kerasbert.layers.precision), in training too.
        block = TransformerEncoderBlock(**KWARGS, dtype="mixed_bfloat16")
        out = block(X, attention_bias=BIAS, training=True)
        assert keras.backend.standardize_dtype(out.dtype) == "float32"
        for layer in (block.attention_layer_norm, block.output_layer_norm,
                      block.attention_dropout, block.output_dropout,
                      block.attention.dropout_layer):
            assert layer.dtype_policy.name == "float32", layer.name
        for layer in (block.attention, block.intermediate_dense, block.output_dense):
            assert layer.dtype_policy.name == "mixed_bfloat16", layer.name
        self.assertAllFinite(out)
        # Inference: the float32 block's values to bfloat16's rounding.
        reference = TransformerEncoderBlock(**KWARGS)
        reference.build(X.shape)
        block_ = TransformerEncoderBlock(**KWARGS, dtype="mixed_bfloat16")
        block_.build(X.shape)
        block_.set_weights(reference.get_weights())
        self.assertAllClose(block_(X, attention_bias=BIAS), reference(X, attention_bias=BIAS),
                            atol=0.05)

    def test_half_precision_weights_compute_in_that_precision(self):
        # A "bfloat16" policy (what a bfloat16 export builds) has no float32
        # to keep: everything, the output included, is bfloat16.
        block = TransformerEncoderBlock(**KWARGS, dtype="bfloat16")
        out = block(X, attention_bias=BIAS)
        assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
        assert block.output_layer_norm.dtype_policy.name == "bfloat16"

    def test_unknown_activation_is_rejected(self):
        with pytest.raises(ValueError, match="Unknown activation"):
            TransformerEncoderBlock(**KWARGS, activation="swishy")
