import numpy as np
import pytest

from kerasbert.layers import MultiHeadCrossAttention
from kerasbert.layers import TransformerDecoderBlock
from kerasbert.layers import TransformerEncoderBlock
from kerasbert.layers import causal_attention_bias
from kerasbert.layers import padding_mask_to_attention_bias
from kerasbert.testing import TestCase

RNG = np.random.default_rng(0)
X = RNG.normal(size=(2, 5, 16)).astype("float32")
MEMORY = RNG.normal(size=(2, 7, 16)).astype("float32")
MEMORY_MASK = np.array([[1] * 7, [1] * 4 + [0] * 3], "int32")


class TestTransformerDecoderBlock(TestCase):
    @pytest.mark.parametrize("norm_first", [False, True])
    def test_layer_basics(self, norm_first):
        # Self-attention qkv + output, cross-attention query, key_value,
        # output (no biases), three LayerNorms, two feed-forward denses.
        self.run_layer_test(
            TransformerDecoderBlock,
            {"num_heads": 2, "intermediate_dim": 32, "dropout": 0.0, "norm_first": norm_first},
            (X, MEMORY), (2, 5, 16), expected_num_trainable_weights=2 + 3 + 6 + 4)

    def test_cross_attention_basics(self):
        self.run_layer_test(MultiHeadCrossAttention, {"num_heads": 2}, (X, MEMORY), (2, 5, 16),
                            expected_num_trainable_weights=6)

    @pytest.mark.parametrize("norm_first", [False, True])
    def test_cached_steps_equal_the_causal_call(self, norm_first):
        block = TransformerDecoderBlock(2, 32, dropout=0.0, norm_first=norm_first)
        cross = padding_mask_to_attention_bias(MEMORY_MASK)
        full = np.asarray(block(X, MEMORY, causal_attention_bias(np.ones((2, 5), "int32")),
                                cross))
        heads = block.cross_attention.project_memory(MEMORY)
        keys = values = np.zeros((2, 6, 2, 8), "float32")
        for i in range(5):
            out, keys, values = block.decode_step(X[:, i:i + 1], i, keys, values, heads, cross)
            np.testing.assert_allclose(np.asarray(out)[:, 0], full[:, i], atol=1e-5)

    def test_padded_memory_is_invisible(self):
        block = TransformerDecoderBlock(2, 32, dropout=0.0)
        cross = padding_mask_to_attention_bias(MEMORY_MASK)
        base = np.asarray(block(X, MEMORY, None, cross))
        changed = MEMORY.copy()
        changed[1, 4:] += 5.0
        np.testing.assert_allclose(np.asarray(block(X, changed, None, cross)), base, atol=1e-5)
        changed[1, 0] += 5.0
        assert np.abs(np.asarray(block(X, changed, None, cross))[1] - base[1]).max() > 1e-3


class TestEncoderBlockOptions(TestCase):
    def test_default_config_is_unchanged_and_options_round_trip(self):
        plain = TransformerEncoderBlock(2, 32)
        assert "norm_first" not in plain.get_config() and "use_bias" not in plain.get_config()
        layer = self.run_layer_test(
            TransformerEncoderBlock,
            {"num_heads": 2, "intermediate_dim": 32, "norm_first": True, "use_bias": False,
             "dropout": 0.0},
            X, (2, 5, 16), expected_num_trainable_weights=2 + 4 + 4)
        assert layer.get_config()["norm_first"] is True

    def test_pre_ln_keeps_the_residual_stream(self):
        # With every branch's output projection zero, a pre-LN block is the
        # identity and a post-LN block normalises.
        for norm_first, identity in ((True, True), (False, False)):
            block = TransformerEncoderBlock(2, 32, dropout=0.0, norm_first=norm_first)
            block(X)
            for dense in (block.attention.output_dense, block.output_dense):
                dense.kernel.assign(np.zeros(dense.kernel.shape, "float32"))
            out = np.asarray(block(X))
            assert np.allclose(out, X, atol=1e-6) == identity
