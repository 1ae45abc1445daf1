"""The hand-written vocabulary cross-entropy equals Keras' (values, top-1
hits and gradients), eager, in a graph, under XLA and under JAX."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.kernels import token_cross_entropy

RNG = np.random.default_rng(0)
# Large logits too: the stable form must not overflow where exp(100) would.
LOGITS = (RNG.normal(size=(3, 5, 37)) * np.array([1.0, 10.0, 100.0])[:, None, None]).astype(
    "float32")
LABELS = RNG.integers(0, 37, size=(3, 5)).astype("int32")
WEIGHTS = RNG.uniform(0.0, 2.0, size=(3, 5)).astype("float32")


def reference(logits, labels):
    ce = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    hits = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels),
                   tf.float32)
    return ce, hits


@pytest.mark.parametrize("jit_compile", [None, False, True])  # eager, graph, XLA
def test_values_hits_and_gradient_equal_keras(jit_compile):
    def run(fn):
        def step(logits):
            with tf.GradientTape() as tape:
                tape.watch(logits)
                ce, hits = fn(logits, tf.constant(LABELS))
                loss = tf.reduce_sum(ce * WEIGHTS)
            return ce, hits, tape.gradient(loss, logits)

        if jit_compile is not None:
            step = tf.function(step, jit_compile=jit_compile)
        return [t.numpy() for t in step(tf.constant(LOGITS))]

    ce, hits, grad = run(token_cross_entropy)
    ref_ce, ref_hits, ref_grad = run(reference)
    assert ce.shape == hits.shape == (3, 5) and ce.dtype == np.float32
    np.testing.assert_allclose(ce, ref_ce, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(hits, ref_hits)
    assert 0 < hits.sum() < hits.size or hits.sum() == 0  # a real 0/1 vector
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-5, atol=1e-6)
    # The gradient rows sum to 0 (softmax - one_hot), scaled by the weights.
    np.testing.assert_allclose(grad.sum(-1), 0.0, atol=1e-5)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_vocabulary_axis_first_equals_last(jit_compile):
    """axis=0 on [V, N] logits gives axis=-1's values, hits and (transposed)
    gradient on [N, V]."""
    logits = LOGITS.reshape(15, 37)
    labels, weights = LABELS.reshape(15), WEIGHTS.reshape(15)

    @tf.function(jit_compile=jit_compile)
    def step(x, axis):
        with tf.GradientTape() as tape:
            tape.watch(x)
            ce, hits = token_cross_entropy(x, tf.constant(labels), axis=axis)
            loss = tf.reduce_sum(ce * weights)
        return ce, hits, tape.gradient(loss, x)

    ce, hits, grad = [t.numpy() for t in step(tf.constant(logits), -1)]
    ce_t, hits_t, grad_t = [t.numpy() for t in step(tf.constant(logits.T), 0)]
    assert ce_t.shape == hits_t.shape == (15,)
    np.testing.assert_allclose(ce_t, ce, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(hits_t, hits)
    np.testing.assert_allclose(grad_t, grad.T, rtol=1e-6, atol=1e-7)


def test_hits_where_the_label_is_the_maximum():
    logits = np.array([[0.0, 3.0, 1.0], [2.0, 2.0, -1.0]], "float32")
    _, hits = token_cross_entropy(logits, np.array([1, 2], "int32"))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(hits), [1.0, 0.0])
    # A tie with the maximum counts as a hit (argmax would pick index 0).
    _, hits = token_cross_entropy(logits, np.array([0, 1], "int32"))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(hits), [0.0, 1.0])


def test_half_precision_logits_are_computed_in_float32():
    ce, _ = token_cross_entropy(LOGITS[0].astype("float16"), LABELS[0])
    ref, _ = reference(tf.constant(LOGITS[0].astype("float16").astype("float32")),
                       tf.constant(LABELS[0]))
    assert keras.ops.convert_to_numpy(ce).dtype == np.float32
    np.testing.assert_allclose(keras.ops.convert_to_numpy(ce), ref.numpy(), rtol=1e-5)


JAX_SCRIPT = """
import numpy as np, keras, jax, jax.numpy as jnp
assert keras.config.backend() == "jax"
from kerasbert.kernels import token_cross_entropy
d = np.load({path!r})
logits, labels, weights = d["logits"], d["labels"], d["weights"]

def ours(l):
    ce, hits = token_cross_entropy(l, labels)
    return jnp.sum(ce * weights), hits

def ref(l):
    ce = keras.losses.sparse_categorical_crossentropy(labels, l, from_logits=True)
    return jnp.sum(ce * weights), (jnp.argmax(l, -1) == labels).astype("float32")

(a, hits), ga = jax.jit(jax.value_and_grad(ours, has_aux=True))(logits)
(b, ref_hits), gb = jax.value_and_grad(ref, has_aux=True)(logits)
assert abs(float(a) - float(b)) < 1e-3 * abs(float(b)), (a, b)
assert np.array_equal(np.asarray(hits), np.asarray(ref_hits))
assert np.abs(np.asarray(ga) - np.asarray(gb)).max() < 1e-5
print("ok")
"""


def test_equal_under_jax(tmp_path):
    pytest.importorskip("jax")
    path = tmp_path / "case.npz"
    np.savez(path, logits=LOGITS, labels=LABELS, weights=WEIGHTS)
    result = subprocess.run(
        [sys.executable, "-c", JAX_SCRIPT.format(path=str(path))],
        env=dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu"),
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]
