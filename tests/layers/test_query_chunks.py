"""Query-chunked attention (`MultiHeadSelfAttention(query_chunk=...)`,
`kerasbert.layers.query_chunks`): the same outputs and gradients as the
plain [B, N, T, T] computation, under TensorFlow and (slow) JAX, and the
plain path where chunks would not help."""

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
from slow_marks import slow_covered_by

# Shared by the TensorFlow test and the JAX script: a plain and a chunked
# layer on the same weights, outputs and gradients of a weighted sum.
SETUP = """
import numpy as np, keras
from kerasbert.layers import MultiHeadSelfAttention, padding_mask_to_attention_bias
rng = np.random.default_rng(0)
x = rng.normal(size=(2, 21, 8)).astype("float32")
w = rng.normal(size=(2, 21, 8)).astype("float32")
mask = np.ones((2, 21), "int32")
mask[1, 14:] = 0
bias = padding_mask_to_attention_bias(mask)
plain = MultiHeadSelfAttention(2, dropout=0.0, use_bias=False, rotary_theta=100.0)
chunked = MultiHeadSelfAttention(2, dropout=0.0, use_bias=False, rotary_theta=100.0, query_chunk=4)
plain.build(x.shape)
chunked.build(x.shape)
chunked.set_weights(plain.get_weights())
"""

JAX_SCRIPT = SETUP + """
import jax
assert keras.config.backend() == "jax"
def grads(layer):
    def loss(xx, vs):
        out, _ = layer.stateless_call(vs, [], xx, attention_bias=bias)
        return (out * w).sum()
    vs = [v.value for v in layer.trainable_variables]
    gx, gv = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, vs)
    return [np.asarray(gx)] + [np.asarray(g) for g in gv]
np.testing.assert_allclose(np.asarray(chunked(x, attention_bias=bias)),
                           np.asarray(plain(x, attention_bias=bias)), atol=1e-5)
for a, b in zip(grads(chunked), grads(plain)):
    np.testing.assert_allclose(a, b, atol=1e-5)
print("ok jax")
"""


def _layers():
    scope = {}
    exec(SETUP, scope)
    return scope


def test_chunked_equals_plain_values_and_gradients():
    import tensorflow as tf

    s = _layers()

    def grads(layer):
        x = tf.constant(s["x"])
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x, attention_bias=s["bias"]) * s["w"])
        return tape.gradient(loss, [x] + layer.trainable_variables)

    np.testing.assert_allclose(np.asarray(s["chunked"](s["x"], attention_bias=s["bias"])),
                               np.asarray(s["plain"](s["x"], attention_bias=s["bias"])),
                               atol=1e-5)
    for a, b in zip(grads(s["chunked"]), grads(s["plain"])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5)


def test_chunked_in_a_compiled_step_with_unknown_length():
    """In a tf.function whose length is unknown (the chunk count is a
    tensor), and without a bias: the plain layer's values."""
    import tensorflow as tf

    s = _layers()
    step = tf.function(lambda x: s["chunked"](x),
                       input_signature=[tf.TensorSpec((None, None, 8), tf.float32)])
    np.testing.assert_allclose(np.asarray(step(s["x"][:, :9])),
                               np.asarray(s["plain"](s["x"][:, :9])), atol=1e-5)


def test_plain_path_where_chunks_do_not_apply():
    s = _layers()
    chunked, x, bias = s["chunked"], s["x"], s["bias"]
    assert chunked.chunks_queries(x, bias, None, None, False)
    assert not chunked.chunks_queries(x[:, :4], bias, None, None, False)  # T <= chunk
    assert not chunked.chunks_queries(x, bias, None, None, True)  # scores returned
    assert not chunked.chunks_queries(x, np.zeros((2, 1, 21, 21), "float32"), None, None,
                                      False)  # a bias per query
    assert chunked.get_config()["query_chunk"] == 4
    assert "query_chunk" not in s["plain"].get_config()


# ~25 s: a fresh Python importing JAX; the default suite checks the same code under TensorFlow.
@slow_covered_by("tests/layers/test_query_chunks.py::test_chunked_equals_plain_values_and_gradients")
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_chunked_equals_plain_under_jax():
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, "-c", JAX_SCRIPT], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok jax")


def test_chunked_gradients_in_a_compiled_step_with_unknown_length():
    """What `fit` runs: the gradient traced at an unknown length equals the
    plain layer's; and it holds no XLA-only op (an export keeps it)."""
    import tensorflow as tf

    s = _layers()

    def gradient_step(layer):
        def step(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(layer(x, attention_bias=s["bias"]) * s["w"])
            return tape.gradient(loss, [x] + layer.trainable_variables)
        return tf.function(step, input_signature=[tf.TensorSpec((None, None, 8), tf.float32)])

    chunked = gradient_step(s["chunked"])
    for a, b in zip(chunked(s["x"]), gradient_step(s["plain"])(s["x"])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5)
    graph = chunked.get_concrete_function().graph.as_graph_def()
    ops = {node.op for node in graph.node}
    for function in graph.library.function:
        ops |= {node.op for node in function.node_def}
    assert not [op for op in ops if op.startswith("Xla")], sorted(ops)
