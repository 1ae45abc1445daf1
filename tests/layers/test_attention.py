import numpy as np

from kerasbert.layers import MASK_BIAS
from kerasbert.layers import MultiHeadSelfAttention
from kerasbert.layers import padding_mask_to_attention_bias
from kerasbert.testing import TestCase

RNG = np.random.RandomState(0)
X = RNG.normal(size=(3, 6, 16)).astype("float32")
MASK = np.array([[1] * 6, [1] * 4 + [0] * 2, [0] * 6], "int32")
BIAS = np.asarray(padding_mask_to_attention_bias(MASK))


def reference_attention(layer, x, mask, num_heads):
    """Plain NumPy multi-head attention with BERT's additive mask."""
    w = layer.qkv_dense.kernel.numpy()
    b = layer.qkv_dense.bias.numpy()
    hidden = x.shape[-1]
    d = hidden // num_heads
    qkv = x @ w + b
    q, k, v = np.split(qkv, 3, axis=-1)

    def heads(t):
        return t.reshape(t.shape[0], t.shape[1], num_heads, d).transpose(0, 2, 1, 3)

    q, k, v = heads(q), heads(k), heads(v)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
    scores = scores + (1.0 - mask[:, None, None, :]) * -10000.0
    scores = scores - scores.max(-1, keepdims=True)
    probs = np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
    ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(x.shape)
    return ctx @ layer.output_dense.kernel.numpy() + layer.output_dense.bias.numpy()


class TestMultiHeadSelfAttention(TestCase):
    def test_layer_basics(self):
        self.run_layer_test(
            MultiHeadSelfAttention,
            {"num_heads": 4},
            (X[:2], BIAS[:2]),
            expected_output_shape=(2, 6, 16),
            expected_num_trainable_weights=4,
        )

    def test_matches_reference(self):
        layer = MultiHeadSelfAttention(num_heads=4, dropout=0.0)
        out = np.asarray(layer(X[:2], BIAS[:2]))
        expected = reference_attention(layer, X[:2], MASK[:2], 4)
        np.testing.assert_allclose(out, expected, atol=1e-5)

    def test_padding_contents_do_not_leak(self):
        layer = MultiHeadSelfAttention(num_heads=4, dropout=0.0)
        noisy = X.copy()
        noisy[1, 4:] = RNG.normal(size=(2, 16)) * 100.0
        a = np.asarray(layer(X, BIAS))
        b = np.asarray(layer(noisy, BIAS))
        np.testing.assert_allclose(a[1, :4], b[1, :4], atol=1e-6)

    def test_mask_bias_is_half_precision_safe(self):
        assert np.isfinite(np.float16(MASK_BIAS))
        assert np.float16(MASK_BIAS) - np.float16(30000) > np.float16(-np.inf)
        assert BIAS.dtype == np.float32 and BIAS.shape == (3, 1, 1, 6)

    def test_half_precision_softmax_runs_in_float32(self):
        for policy in ("mixed_float16", "mixed_bfloat16"):
            layer = MultiHeadSelfAttention(num_heads=4, dtype=policy)
            out, probs = layer(X, BIAS, return_attention_scores=True)
            probs = np.asarray(probs)
            assert probs.dtype == np.float32
            # A half-precision softmax would only sum to 1 within ~1e-3.
            np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-6)
            # Fully padded row: finite, uniform-ish, no NaN.
            self.assertAllFinite(out, policy)
            assert np.all(probs[1, :, :, 4:] == 0.0)
