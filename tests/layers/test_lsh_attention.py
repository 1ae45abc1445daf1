"""The Reformer's LSH self-attention: exact with one bucket and one chunk,
closer to full attention with more hashing rounds (measured), causal and
padding masks that never leak, deterministic outside training."""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.layers.lsh_attention import LSHSelfAttention
from kerasbert.testing import TestCase

sys.path.insert(0, os.path.dirname(__file__))
from reference_attention import dense_attention  # noqa: E402

HIDDEN, HEADS = 16, 2


def _inputs(length, batch=2, real=None, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(batch, length, HIDDEN).astype("float32")
    mask = np.ones((batch, length), "int32")
    if real is not None:
        mask[-1, real:] = 0
    return x, mask


def full_shared_qk_attention(layer, x, mask, causal=False):
    """Reference: full attention with the layer's weights, shared QK (unit
    keys, no 1/sqrt(d)), own position only when nothing else is left;
    numpy, written from the paper's definition."""
    qk_kernel = np.asarray(layer.query_key_dense.kernel)
    v_kernel = np.asarray(layer.value_dense.kernel)
    b, t, _ = x.shape
    d = HIDDEN // HEADS
    qk = (x @ qk_kernel).reshape(b, t, HEADS, d).transpose(0, 2, 1, 3)
    v = (x @ v_kernel).reshape(b, t, HEADS, d).transpose(0, 2, 1, 3)
    keys = qk / np.linalg.norm(qk, axis=-1, keepdims=True)
    scores = np.einsum("bntd,bnsd->bnts", qk, keys)
    allowed = np.broadcast_to(mask[:, None, None, :].astype(bool), scores.shape).copy()
    if causal:
        allowed &= np.tril(np.ones((t, t), bool))
    return dense_attention(scores, allowed, v, layer.output_dense, own=np.eye(t, dtype=bool))


class TestLSHSelfAttention(TestCase):
    def test_layer_basics(self):
        x, mask = _inputs(24, real=17)
        self.run_layer_test(
            LSHSelfAttention,
            dict(num_heads=HEADS, num_hashes=2, num_buckets=4, chunk_length=8, seed=3),
            (x, mask), expected_output_shape=(2, 24, HIDDEN),
            expected_num_trainable_weights=3)

    def test_one_bucket_one_chunk_equals_full_shared_qk_attention(self):
        x, mask = _inputs(32, real=21)
        for causal in (False, True):
            layer = LSHSelfAttention(HEADS, num_hashes=1, num_buckets=1, chunk_length=32,
                                     num_chunks_before=0, causal=causal)
            out = np.asarray(layer(x, mask))
            ref = full_shared_qk_attention(layer, x, mask, causal)
            real = mask.astype(bool)
            np.testing.assert_allclose(out[real], ref[real], atol=1e-5, rtol=1e-5)

    def test_a_length_that_is_not_a_multiple_of_the_chunk(self):
        x, mask = _inputs(29)
        layer = LSHSelfAttention(HEADS, num_hashes=1, num_buckets=1, chunk_length=32,
                                 num_chunks_before=0)
        np.testing.assert_allclose(np.asarray(layer(x, mask)),
                                   full_shared_qk_attention(layer, x, mask), atol=1e-5)

    def test_more_hashing_rounds_approximate_full_attention_better(self):
        """Measured: random inputs and a query/key projection scaled up so
        attention is peaked (each token attends to its few nearest in angle,
        as a trained model's does); the mean error against full shared-QK
        attention falls with every doubling of the rounds (2.1e-3, 1.3e-3,
        7.7e-4, 5.8e-4 when written)."""
        x = np.random.RandomState(1).randn(2, 128, HIDDEN).astype("float32")
        mask = np.ones((2, 128), "int32")
        errors = {}
        for rounds in (1, 2, 4, 8):
            layer = LSHSelfAttention(HEADS, num_hashes=rounds, num_buckets=16, chunk_length=8,
                                     num_chunks_before=1, seed=11)
            layer.build(x.shape)
            if rounds == 1:
                weights = layer.get_weights()
                weights[0] = weights[0] * 100.0  # the query/key kernel
            layer.set_weights(weights)
            ref = full_shared_qk_attention(layer, x, mask)
            errors[rounds] = float(np.abs(np.asarray(layer(x, mask)) - ref).mean())
        assert errors[2] < 0.9 * errors[1] and errors[4] < 0.9 * errors[2], errors
        assert errors[8] < 0.9 * errors[4] and errors[8] < 0.5 * errors[1], errors

    def test_factorised_buckets(self):
        layer = LSHSelfAttention(HEADS, num_hashes=3, num_buckets=(4, 6), chunk_length=8)
        x, mask = _inputs(16)
        layer(x, mask)
        qk = tf.random.normal((2, HEADS, 16, HIDDEN // HEADS))
        buckets = np.asarray(layer.hash_buckets(qk))
        assert buckets.shape == (2, HEADS, 3, 16) and layer.total_buckets == 24
        assert buckets.min() >= 0 and buckets.max() < 24
        with pytest.raises(ValueError, match="even"):
            LSHSelfAttention(HEADS, num_buckets=(4, 3))

    def test_causal_no_output_depends_on_a_later_position(self):
        x, mask = _inputs(32)
        layer = LSHSelfAttention(HEADS, num_hashes=2, num_buckets=4, chunk_length=8,
                                 causal=True, seed=5)
        layer(x, mask)
        x = tf.constant(x)
        for t in (0, 9, 20):
            with tf.GradientTape() as tape:
                tape.watch(x)
                out = layer(x, mask)[:, t]
            grad = np.asarray(tape.gradient(out, x))
            assert np.abs(grad[:, t + 1:]).max() == 0.0, t
            assert np.abs(grad[:, :t + 1]).max() > 0.0, t

    def test_padding_never_leaks(self):
        """Whatever the padded positions hold, real tokens' outputs do not
        change, with real hashing: padding sorts into a bucket of its own
        after the others, so it never moves real tokens between chunks."""
        x, mask = _inputs(48, real=29)
        changed = x.copy()
        changed[-1, 29:] = 100 * np.random.RandomState(9).randn(19, HIDDEN)
        for causal in (False, True):
            layer = LSHSelfAttention(HEADS, num_hashes=3, num_buckets=4, chunk_length=8,
                                     num_chunks_before=1, num_chunks_after=1, causal=causal)
            out = np.asarray(layer(x, mask))
            again = np.asarray(layer(changed, mask))
            np.testing.assert_allclose(out[-1, :29], again[-1, :29], atol=1e-5)
            np.testing.assert_allclose(out[0], again[0], atol=1e-6)
            # Unmasked, the same change does move the real tokens (the check
            # would pass for a layer that ignored its input).
            full = np.ones_like(mask)
            moved = np.abs(np.asarray(layer(x, full))[-1, :29]
                           - np.asarray(layer(changed, full))[-1, :29]).max()
            assert moved > 1e-3, moved

    def test_training_draws_new_rotations_evaluation_does_not(self):
        x, mask = _inputs(32)
        layer = LSHSelfAttention(HEADS, num_hashes=1, num_buckets=8, chunk_length=4, seed=4)
        a, b = np.asarray(layer(x, mask)), np.asarray(layer(x, mask))
        np.testing.assert_array_equal(a, b)
        c, d = (np.asarray(layer(x, mask, training=True)) for _ in range(2))
        assert np.abs(c - d).max() > 1e-4
