"""kerasbert.kernels: the TensorFlow forms equal the portable Keras ones."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert import kernels
from kerasbert.kernels import encoder

RNG = np.random.default_rng(0)


def _value_and_grads(fn, x, variables, upstream):
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = fn(x)
    grads = tape.gradient(out, [x] + variables, output_gradients=upstream)
    return [out.numpy()] + [tf.convert_to_tensor(g).numpy() for g in grads]


@pytest.mark.parametrize("soft_cap", [None, 3.0])
def test_decoder_logits_equal_the_reverse_embedding(soft_cap):
    """Values and both gradients; a soft-capped table takes Keras' path."""
    table = keras.layers.ReversibleEmbedding(37, 8, logit_soft_cap=soft_cap)
    table.build((None,))
    x = tf.constant(RNG.normal(size=(3, 5, 8)).astype("float32"))
    upstream = tf.constant(RNG.normal(size=(3, 5, 37)).astype("float32"))
    got = _value_and_grads(lambda h: kernels.decoder_logits(h, table), x,
                           [table.embeddings], upstream)
    want = _value_and_grads(lambda h: table(h, reverse=True), x, [table.embeddings], upstream)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("soft_cap", [None, 3.0])
@pytest.mark.parametrize("with_bias", [False, True])
def test_decoder_cross_entropy_equals_the_loss_of_the_logits(soft_cap, with_bias):
    """The fused decoder + cross-entropy (vocabulary-major inside) gives the
    cross-entropy, hits and gradients (hidden states, table, bias) of
    `token_cross_entropy` on `decoder_logits`, eagerly and under XLA; for a
    tied embedding and an untied [V, E] kernel."""
    embedding = keras.layers.ReversibleEmbedding(37, 8, logit_soft_cap=soft_cap)
    embedding.build((None,))
    kernel = tf.Variable(RNG.normal(size=(37, 8)).astype("float32"))
    bias = tf.Variable(RNG.normal(size=37).astype("float32")) if with_bias else None
    x = tf.constant(RNG.normal(size=(2, 3, 8)).astype("float32"))
    labels = tf.constant(RNG.integers(0, 37, (2, 3)).astype("int32"))
    upstream = tf.constant(RNG.normal(size=(2, 3)).astype("float32"))
    for decoder, table in ((embedding, embedding.embeddings), (kernel, kernel)):
        variables = [table] + ([bias] if with_bias else [])

        def plain(h):
            return kernels.token_cross_entropy(kernels.decoder_logits(h, decoder, bias), labels)[0]

        def fused(h):
            return kernels.decoder_cross_entropy(h, labels, decoder, bias)[0]

        want = _value_and_grads(plain, x, variables, upstream)
        for fn in (fused, tf.function(fused, jit_compile=True)):
            got = _value_and_grads(fn, x, variables, upstream)
            assert got[0].shape == (2, 3)
            for a, b in zip(got, want):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        hits = kernels.decoder_cross_entropy(x, labels, decoder, bias)[1]
        plain_hits = kernels.token_cross_entropy(kernels.decoder_logits(x, decoder, bias), labels)[1]
        np.testing.assert_array_equal(hits, plain_hits)


@pytest.mark.parametrize("shape", [(7, 8), (2, 3, 8), (2, 3, 4, 8)])
def test_matmul_transposed_any_rank_and_under_xla(shape):
    kernel = tf.Variable(RNG.normal(size=(11, 8)).astype("float32"))
    x = tf.constant(RNG.normal(size=shape).astype("float32"))
    upstream = tf.constant(RNG.normal(size=shape[:-1] + (11,)).astype("float32"))
    want = _value_and_grads(lambda h: h @ tf.transpose(kernel), x, [kernel], upstream)
    fast = tf.function(lambda h: kernels.matmul_transposed(h, kernel), jit_compile=True)
    for fn in (lambda h: kernels.matmul_transposed(h, kernel), fast):
        for a, b in zip(_value_and_grads(fn, x, [kernel], upstream), want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def _keras_dense(units, activation, dtype):
    """A keras Dense with the activation of that name, built on width 8."""
    from kerasbert.layers.activations import get_activation

    layer = keras.layers.Dense(units, activation=get_activation(activation) if activation else None,
                               dtype=dtype)
    layer.build((None, 8))
    return layer


@pytest.mark.parametrize("activation", [None, "gelu", "tanh"])
def test_dense_equals_keras_dense_and_its_gradients(activation):
    """float32, [B, T, I] inputs, in a graph: values and the gradients of
    the input, kernel and bias equal keras.layers.Dense's."""
    layer = _keras_dense(6, activation, "float32")
    x = tf.constant(RNG.normal(size=(3, 5, 8)).astype("float32"))
    upstream = tf.constant(RNG.normal(size=(3, 5, 6)).astype("float32"))
    variables = [layer.kernel, layer.bias]
    act = layer.activation if activation else None

    @tf.function
    def ours(h):
        return kernels.dense(h, layer.kernel, layer.bias, act)

    got = _value_and_grads(ours, x, variables, upstream)
    want = _value_and_grads(layer, x, variables, upstream)
    assert got[0].shape == (3, 5, 6)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("graph", [False, True])
@pytest.mark.parametrize("form", ["written_out", "compiled"])
def test_the_gelu_training_forms_and_their_gradients_equal_keras(form, graph):
    """kernels.gelu's hand-written gradient and the compiled loops (at a
    width that takes them) against TensorFlow differentiating Keras's erf
    GELU, on values from -12 to 12; the compiled bfloat16 form is the
    float32 computation rounded once."""
    x = tf.constant(np.concatenate([np.linspace(-12, 12, 1024),
                                    RNG.normal(size=1024) * 3]).astype("float32").reshape(4, 512))
    upstream = tf.constant(RNG.normal(size=x.shape).astype("float32"))
    ours = kernels.gelu if form == "written_out" else kernels.compiled_gelu
    theirs = lambda h: keras.activations.gelu(h, approximate=False)  # noqa: E731
    assert kernels.compiled_gelu_applies(x)
    if graph:
        ours, theirs = tf.function(ours), tf.function(theirs)
    got = _value_and_grads(ours, x, [], upstream)
    want = _value_and_grads(theirs, x, [], upstream)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    if form == "compiled":
        half, half_up = tf.cast(x, "bfloat16"), tf.cast(upstream, "bfloat16")
        got = _value_and_grads(ours, half, [], half_up)
        want = _value_and_grads(lambda h: tf.cast(theirs(tf.cast(h, "float32")), "bfloat16"),
                                half, [], half_up)
        assert got[0].dtype == want[0].dtype == tf.bfloat16.as_numpy_dtype
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.astype("float32"), b.astype("float32"), rtol=2**-8,
                                       atol=1e-6)


def test_the_compiled_gelu_is_a_wide_training_form_only(monkeypatch):
    """Only wide TensorFlow activations take the compiled loops, only in
    training: an encoder block's feed-forward at 512 trains through them
    (with the same loss and gradients as TensorFlow's kernels) and serves
    without them; narrow widths and other activations keep their form."""
    from kerasbert.layers import TransformerEncoderBlock
    from kerasbert.layers.activations import for_training
    from kerasbert.layers.activations import get_activation

    assert not kernels.compiled_gelu_applies(tf.zeros((2, 511)))
    assert not kernels.compiled_gelu_applies(tf.zeros((2, 512), tf.int32))
    gelu, relu = get_activation("gelu"), get_activation("relu")
    assert for_training(gelu, False) is gelu and for_training(relu, True) is relu
    assert for_training(gelu, True) is gelu.training_form
    calls = []
    real = kernels.compiled_gelu
    monkeypatch.setattr(kernels, "compiled_gelu", lambda h: calls.append(tuple(h.shape)) or real(h))
    block = TransformerEncoderBlock(num_heads=2, intermediate_dim=512, dropout=0.0)
    x = tf.constant(RNG.normal(size=(2, 5, 16)).astype("float32"))
    block(x)
    assert calls == []                                   # inference: the fused form
    upstream = tf.constant(RNG.normal(size=(2, 5, 16)).astype("float32"))
    compiled = _value_and_grads(lambda h: block(h, training=True), x,
                                block.trainable_variables, upstream)
    assert calls == [(10, 512)]                          # the 2-D product, [B * T, I]
    monkeypatch.setattr(encoder, "COMPILED_GELU_MIN_WIDTH", 10**9)
    plain = _value_and_grads(lambda h: block(h, training=True), x,
                             block.trainable_variables, upstream)
    assert calls == [(10, 512)]
    for a, b in zip(compiled, plain):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_fused_bfloat16_gelu_equals_the_float32_cast_form():
    """At inference a bfloat16 product's GELU runs inside the product's
    kernel (computed there in float32): the same values as casting the
    product to float32 for GELU, to bfloat16's rounding of the product, and
    within bfloat16's rounding of the float32 layer."""
    layer = _keras_dense(32, "gelu", "float32")
    x = tf.constant(RNG.normal(size=(4, 7, 8)).astype("float32"))
    kernel, bias = tf.cast(layer.kernel, "bfloat16"), tf.cast(layer.bias, "bfloat16")
    half = tf.cast(x, "bfloat16")
    fused = tf.function(lambda h: kernels.dense(h, kernel, bias, layer.activation,
                                                layer.activation.fused_form))(half)
    cast = tf.function(lambda h: kernels.dense(h, kernel, bias, layer.activation))(half)
    assert fused.dtype == tf.bfloat16 and fused.shape == (4, 7, 32)
    fused, cast = (tf.cast(t, "float32").numpy() for t in (fused, cast))
    np.testing.assert_allclose(fused, cast, rtol=2**-7, atol=2**-7)
    np.testing.assert_allclose(fused, layer(x).numpy(), rtol=2**-6, atol=2**-6)


def test_fused_bfloat16_softmax_is_the_float32_softmax_bit_for_bit():
    """Outside training bfloat16 scores go to the Softmax kernel as they
    are; with oneDNN it computes in float32 and rounds once: the same bits
    as the float32 form rounded to bfloat16, padded keys exactly 0, and a
    fully padded row no NaN."""
    scores = tf.cast(RNG.normal(size=(2, 3, 5, 40)).astype("float32") * 4, "bfloat16")
    mask = np.ones((2, 40), "int32")
    mask[0, 25:] = 0
    mask[1, :] = 0
    from kerasbert.layers.attention_bias import padding_mask_to_attention_bias

    bias = padding_mask_to_attention_bias(tf.constant(mask))
    fused = tf.function(lambda s: kernels.attention_softmax(s, bias, fused=True))(scores)
    plain = kernels.attention_softmax(scores, bias)
    assert plain.dtype == tf.float32
    assert fused.dtype == (tf.bfloat16 if encoder._onednn() else tf.float32)
    fused = tf.cast(fused, "float32").numpy()
    rounded = tf.cast(tf.cast(plain, "bfloat16"), "float32").numpy()
    np.testing.assert_array_equal(fused[0], rounded[0])
    assert fused[0, ..., 25:].max() == 0
    # The fully padded row (whose outputs no loss or answer reads): scores
    # plus MASK_BIAS round to one bfloat16 value, so its weights are even.
    assert not np.isnan(fused).any()
    np.testing.assert_allclose(fused[1].sum(-1), 1, atol=1e-2)


def test_fused_dense_keeps_dense_weights_and_round_trips_its_config():
    """Same variables as keras Dense (so checkpoints and converters see no
    change), the activation stored by name, and training computing the
    activation apart with the same result in float32."""
    from kerasbert.layers.fused_dense import FusedDense

    layer = FusedDense(6, activation="gelu", name="intermediate")
    layer.build((None, 8))
    assert [v.path for v in layer.weights] == ["intermediate/kernel", "intermediate/bias"]
    config = layer.get_config()
    assert config["activation"] == "gelu"
    again = FusedDense.from_config(config)
    again.build((None, 8))
    again.set_weights(layer.get_weights())
    x = RNG.normal(size=(2, 4, 8)).astype("float32")
    np.testing.assert_allclose(again(x, training=True), layer(x), rtol=1e-6, atol=1e-6)
    expected = keras.activations.gelu(x @ layer.kernel.numpy() + layer.bias.numpy(),
                                      approximate=False)
    np.testing.assert_allclose(layer(x), expected, rtol=1e-5, atol=1e-5)
    # LoRA: the kernel property carries the low-rank update into the product.
    layer.enable_lora(2)
    layer.lora_kernel_b.assign(RNG.normal(size=(2, 6)).astype("float32"))
    kernel = keras.ops.convert_to_numpy(layer.kernel)
    assert np.abs(kernel - again.kernel.numpy()).max() > 1e-3
    expected = keras.activations.gelu(x @ kernel + layer.bias.numpy(), approximate=False)
    np.testing.assert_allclose(layer(x), expected, rtol=1e-5, atol=1e-5)


JAX_SCRIPT = """
import numpy as np, keras
assert keras.config.backend() == "jax"
from kerasbert import kernels
table = keras.layers.ReversibleEmbedding(13, 4)
table.build((None,))
x = np.random.default_rng(0).normal(size=(2, 3, 4)).astype("float32")
a = keras.ops.convert_to_numpy(kernels.decoder_logits(x, table))
b = keras.ops.convert_to_numpy(table(x, reverse=True))
assert np.abs(a - b).max() < 1e-6
dense = keras.layers.Dense(5, activation="tanh")
dense.build((None, 4))
a = keras.ops.convert_to_numpy(kernels.dense(x, dense.kernel, dense.bias, keras.activations.tanh,
                                              keras.activations.tanh))
assert np.abs(a - keras.ops.convert_to_numpy(dense(x))).max() < 1e-6
scores = np.random.default_rng(1).normal(size=(2, 1, 3, 3)).astype("float32")
probs = keras.ops.convert_to_numpy(kernels.attention_softmax(scores, None, fused=True))
assert np.abs(probs.sum(-1) - 1).max() < 1e-6
q = np.random.default_rng(2).normal(size=(2, 3, 1, 4)).astype("float32")
bias = np.zeros((2, 1, 1, 3), "float32")
bias[0, ..., 2] = -3e4
probs = keras.ops.convert_to_numpy(kernels.attention_probabilities(q, q, bias, fused=True))
assert probs.shape == (2, 1, 3, 3) and probs[0, ..., 2].max() == 0
gamma, beta = np.ones(4, "float32"), np.zeros(4, "float32")
normed = keras.ops.convert_to_numpy(kernels.layer_norm(x, gamma, beta, 1e-12, fused=True))
assert np.abs(normed.mean(-1)).max() < 1e-5
x = np.ones((4, 6), "float32")
dropped = keras.ops.convert_to_numpy(kernels.dropout(x, 0.5, keras.random.SeedGenerator(1)))
assert set(np.unique(dropped).tolist()) <= {0.0, 2.0}
print("ok")
"""


def test_portable_forms_under_jax():
    pytest.importorskip("jax")
    result = subprocess.run(
        [sys.executable, "-c", JAX_SCRIPT],
        env=dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu"),
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-3000:]


def test_the_eager_reversible_forward_pass_tapes_nothing():
    """Eagerly, tf.custom_gradient runs the forward pass while the caller's
    tape records: unless cut off, every op of every layer is taped with its
    activations, and an eager (run_eagerly=True) step's memory grows with
    depth (2 -> 8 layers at 16k tokens: 1.9 -> 6.1 GB; cut off: 1.5 -> 2.0,
    README). The forward pass's tensors are not on the tape; the gradient is
    the recomputing one, equal to ordinary backpropagation."""
    rng = np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(2, 3, 4)), "float32")
    ws = [[tf.constant(rng.normal(size=(4, 4)), "float32")] for _ in range(6)]
    seen = []

    def branch(h, w):
        out = tf.tanh(tf.einsum("bth,hk->btk", h, w[0]))
        seen.append(out)
        return out

    functions = [(branch, branch)] * 3
    weights = [(ws[2 * i], ws[2 * i + 1]) for i in range(3)]
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([x] + [w[0] for w in ws])
        outputs = kernels.reversible_layers(functions, x, x, weights)
        loss = tf.reduce_sum(outputs[-1][0] * outputs[-1][1])
    forward = list(seen)
    assert len(forward) == 6
    assert all(tape.gradient(t, x) is None for t in forward)  # nothing of it taped
    recomputed = tape.gradient(loss, [x] + [w[0] for w in ws])
    with tf.GradientTape() as plain_tape:
        plain_tape.watch([x] + [w[0] for w in ws])
        plain = kernels.reversible_layers(functions, x, x, weights, recompute=False)
        plain_loss = tf.reduce_sum(plain[-1][0] * plain[-1][1])
    expected = plain_tape.gradient(plain_loss, [x] + [w[0] for w in ws])
    for a, b in zip(recomputed, expected):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-5)


def _optimized_ops(fn, args, specs):
    """The op types TensorFlow ran for `fn(*args)` as a tf.function of
    `specs` (dynamic batch and length, as a serving signature): its graph
    after grappler, the remapper included."""
    from tensorflow.python.eager import context

    function = tf.function(fn, input_signature=specs)
    context.enable_run_metadata()
    try:
        context.export_run_metadata()          # drop what earlier calls left
        function(*args)
        metadata = context.export_run_metadata()
    finally:
        context.disable_run_metadata()
    return {node.op for graphs in metadata.function_graphs
            for graph in graphs.partition_graphs for node in graph.node}


def _float64_layer_norm(x, gamma, beta, epsilon):
    x = x.astype("float64")
    centered = x - x.mean(-1, keepdims=True)
    return centered / np.sqrt(x.var(-1, keepdims=True) + epsilon) * gamma + beta


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fused_layer_norm_is_one_kernel_and_equals_the_float64_norm(dtype):
    """Outside training, with a dynamic row count, the LayerNorm's ops become
    one `_MklLayerNorm` (with oneDNN); its values equal LayerNorm computed in
    float64 as closely as Keras's form does, a constant row included."""
    x = RNG.normal(size=(4, 9, 32)).astype("float32") * 2 + 1.5
    x[0, 0] = 2.5                                   # zero variance: beta
    gamma, beta = (RNG.normal(size=32).astype("float32") for _ in range(2))
    half = dtype == "bfloat16"
    if half:
        x, gamma, beta = (tf.cast(tf.cast(v, dtype), "float32").numpy() for v in (x, gamma, beta))
    spec = tf.TensorSpec([None, None, 32], dtype)
    # Variables, as in a model (constants would be folded into the scale).
    weights = [tf.Variable(tf.cast(v, dtype)) for v in (gamma, beta)]
    fused = lambda t: kernels.layer_norm(t, *weights, 1e-12, fused=True)
    got = tf.function(fused, input_signature=[spec])(tf.cast(x, dtype))
    assert got.dtype == dtype and got.shape == x.shape
    want = _float64_layer_norm(x, gamma, beta, 1e-12)
    tolerance = 2**-7 * 8 if half else 2e-5
    np.testing.assert_allclose(tf.cast(got, "float32").numpy(), want, rtol=tolerance,
                               atol=tolerance)
    keras_form = keras.ops.layer_normalization(x, gamma, beta, epsilon=1e-12).numpy()
    np.testing.assert_allclose(keras_form[1:], want[1:], rtol=2e-5, atol=2e-5)
    if encoder._onednn():
        ops_run = _optimized_ops(fused, [tf.cast(x, dtype)], [spec])
        assert "_MklLayerNorm" in ops_run and "Mean" not in ops_run


def test_layer_norm_keeps_keras_form_in_training_and_for_a_fixed_row_count():
    """Training (its gradient is TensorFlow's own), a fixed row count (the
    remapper would not fuse it) and a missing offset take Keras's form: the
    same values (to float32 rounding: a graph may order the sums
    differently)."""
    from kerasbert.layers import FusedLayerNorm

    x = RNG.normal(size=(3, 5, 16)).astype("float32")
    layer = FusedLayerNorm(epsilon=1e-12, name="layer_norm")
    layer.build(x.shape)
    layer.set_weights([RNG.normal(size=16).astype("float32") for _ in range(2)])
    reference = keras.layers.LayerNormalization(epsilon=1e-12)
    reference.build(x.shape)
    reference.set_weights(layer.get_weights())
    want = reference(x).numpy()
    np.testing.assert_allclose(layer(x, training=True).numpy(), want, rtol=1e-6, atol=1e-6)
    static = tf.function(lambda t: layer(t, training=False))(x)    # [3, 5] rows: fixed
    np.testing.assert_allclose(static.numpy(), want, rtol=1e-6, atol=1e-6)
    assert not encoder._fusable_layer_norm(tf.constant(x), layer.gamma, None)
    assert [v.path for v in layer.weights] == ["layer_norm/gamma", "layer_norm/beta"]
    assert FusedLayerNorm.from_config(layer.get_config()).epsilon == 1e-12
    with pytest.raises(ValueError, match="last axis"):
        FusedLayerNorm(axis=1)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_fused_attention_probabilities_carry_the_padding_bias_in_the_product(dtype):
    """Outside training a [B, 1, 1, S] padding bias rides in the product as
    two extra columns: the probabilities of the plain form (to the dtype's
    rounding), padded keys exactly 0, a fully padded row no NaN."""
    from kerasbert.layers.attention_bias import padding_mask_to_attention_bias

    query, key = (tf.cast(RNG.normal(size=(2, 6, 3, 8)).astype("float32"), dtype)
                  for _ in range(2))
    key = tf.concat([key, key[:, :2]], axis=1)             # S = 8 keys
    mask = np.ones((2, 8), "int32")
    mask[0, 5:] = 0
    mask[1, :] = 0
    bias = padding_mask_to_attention_bias(tf.constant(mask))
    fused = tf.function(lambda q, k: kernels.attention_probabilities(q, k, bias, fused=True))
    got = tf.cast(fused(query, key), "float32").numpy()
    want = kernels.attention_probabilities(query, key, bias).numpy()
    assert got.shape == want.shape == (2, 3, 6, 8)
    tolerance = 2**-7 if dtype == "bfloat16" else 1e-6
    np.testing.assert_allclose(got[0], want[0], rtol=tolerance, atol=tolerance)
    assert got[0, ..., 5:].max() == 0
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got[1].sum(-1), 1, atol=2e-2)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_an_encoder_block_serves_its_layer_norms_fused(dtype):
    """What an export runs: an encoder block outside training, batch and
    length dynamic, has its LayerNorms as `_MklLayerNorm` kernels (no
    Keras-form reduction left) and its projections as fused products."""
    if not encoder._onednn():
        pytest.skip("oneDNN is off: TensorFlow runs the plain kernels")
    from kerasbert.layers import TransformerEncoderBlock

    block = TransformerEncoderBlock(num_heads=2, intermediate_dim=32, dtype=dtype)
    block.build((None, None, 16))
    x = tf.cast(RNG.normal(size=(2, 5, 16)), dtype)
    bias = tf.zeros((2, 1, 1, 5))
    specs = [tf.TensorSpec([None, None, 16], dtype), tf.TensorSpec([None, 1, 1, None])]
    ops_run = _optimized_ops(lambda x, b: block(x, attention_bias=b, training=False), [x, bias],
                             specs)
    assert "_MklLayerNorm" in ops_run and "Mean" not in ops_run, sorted(ops_run)
    assert "_MklNativeFusedMatMul" in ops_run or "_FusedMatMul" in ops_run, sorted(ops_run)


PLAIN_KERNELS_SCRIPT = """
import sys, numpy as np, tensorflow as tf
from tensorflow.python.util import _pywrap_util_port
assert not _pywrap_util_port.IsMklEnabled()
served = tf.saved_model.load(sys.argv[1])
x = np.load(sys.argv[2])
np.save(sys.argv[3], served.serve(tf.constant(x), tf.zeros((x.shape[0], 1, 1, x.shape[1]))).numpy())
"""


def test_a_graph_saved_with_the_fused_forms_runs_on_plain_kernels(tmp_path):
    """A SavedModel traced under oneDNN holds the fused forms' ops
    (FusedBatchNormV3 in NCHW, the bias columns); a server without oneDNN
    (TF_ENABLE_ONEDNN_OPTS=0, or a TF Serving build without it) runs them
    with TensorFlow's plain kernels to the same outputs."""
    from kerasbert.layers import TransformerEncoderBlock

    block = TransformerEncoderBlock(num_heads=2, intermediate_dim=32)
    block.build((None, None, 16))
    module = tf.Module()
    module.block = block
    module.serve = tf.function(
        lambda x, b: block(x, attention_bias=b, training=False),
        input_signature=[tf.TensorSpec([None, None, 16]), tf.TensorSpec([None, 1, 1, None])])
    tf.saved_model.save(module, str(tmp_path / "model"))
    x = RNG.normal(size=(2, 5, 16)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    graph = module.serve.get_concrete_function().graph.as_graph_def()
    if encoder._onednn():
        assert "FusedBatchNormV3" in {n.op for n in graph.node}
    result = subprocess.run(
        [sys.executable, "-c", PLAIN_KERNELS_SCRIPT, str(tmp_path / "model"),
         str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
        env=dict(os.environ, TF_ENABLE_ONEDNN_OPTS="0"), capture_output=True, text=True,
        timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    want = module.serve(tf.constant(x), tf.zeros((2, 1, 1, 5))).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=1e-5, atol=1e-5)


def _draw_ops(fn, *args):
    graph = tf.function(fn).get_concrete_function(*args).graph
    return {(op.type, tuple(op.outputs[0].shape)) for op in graph.get_operations()
            if op.type.startswith("StatelessRandomUniform")}


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_dropout_draws_16_bits_per_element_at_the_rounded_rate(rate):
    """Under TensorFlow each element's draw is 16 bits (one uint32 draw per
    two elements); kept elements are scaled by 1 / (1 - rounded rate), so
    the mean is kept; the dropped fraction is the rate."""
    x = tf.constant(RNG.normal(size=(16, 40, 64)), "float32")
    seeds = keras.random.SeedGenerator(3)
    y = kernels.dropout(x, rate, seeds).numpy()
    threshold = round(rate * 2**16)
    kept = y != 0
    np.testing.assert_allclose(y[kept], x.numpy()[kept] * 2**16 / (2**16 - threshold), rtol=1e-6)
    assert abs((~kept).mean() - threshold / 2**16) < 0.01
    assert _draw_ops(lambda t: kernels.dropout(t, rate, seeds), x) == {
        ("StatelessRandomUniformFullIntV2", (16 * 40 * 64 // 2,))}
    ones = tf.ones((256, 512))
    assert abs(kernels.dropout(ones, rate, seeds).numpy().mean() - 1.0) < 0.01


def test_dropout_is_seeded_differs_per_call_and_has_the_mask_gradient():
    x = tf.constant(RNG.normal(size=(4, 6, 8)), "float32")
    a = kernels.dropout(x, 0.3, keras.random.SeedGenerator(5)).numpy()
    b = kernels.dropout(x, 0.3, keras.random.SeedGenerator(5)).numpy()
    np.testing.assert_array_equal(a, b)
    seeds = keras.random.SeedGenerator(5)
    first, second = (kernels.dropout(x, 0.3, seeds).numpy() for _ in range(2))
    assert (first != second).any()
    seeds = keras.random.SeedGenerator(5)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = kernels.dropout(x, 0.3, seeds)
    grad = tape.gradient(y, x, output_gradients=tf.ones_like(x)).numpy()
    scale = 2**16 / (2**16 - round(0.3 * 2**16))
    np.testing.assert_allclose(grad, np.where(a != 0, scale, 0.0), rtol=1e-6)
    # bfloat16 inputs keep their dtype and draw the same mask.
    low = kernels.dropout(tf.cast(x, tf.bfloat16), 0.3, keras.random.SeedGenerator(5))
    assert low.dtype == tf.bfloat16
    np.testing.assert_array_equal(low.numpy() != 0, a != 0)
    # Under XLA the same draw compiles.
    seeds = keras.random.SeedGenerator(5)
    compiled = tf.function(lambda t: kernels.dropout(t, 0.3, seeds), jit_compile=True)(x)
    assert compiled.shape == x.shape


def test_dropout_takes_keras_draw_for_odd_sizes_and_broadcast_masks():
    seeds = keras.random.SeedGenerator(1)
    odd = tf.ones((3, 5))
    assert _draw_ops(lambda t: kernels.dropout(t, 0.2, seeds), odd) == {
        ("StatelessRandomUniformV2", (3, 5))}
    even = tf.ones((4, 6))
    broadcast = kernels.dropout(even, 0.5, seeds, noise_shape=(4, 1)).numpy()
    assert all(len(set(row.tolist())) == 1 for row in broadcast)
    np.testing.assert_array_equal(kernels.dropout(even, 0.0, seeds), even)


def test_fast_dropout_keeps_keras_dropout_config_and_seed_state():
    from kerasbert.layers import FastDropout

    layer = FastDropout(0.2, seed=4, name="drop")
    config = layer.get_config()
    assert config == keras.layers.Dropout(0.2, seed=4, name="drop").get_config()
    again = FastDropout.from_config(config)
    x = tf.ones((8, 16))
    np.testing.assert_array_equal(layer(x, training=True), again(x, training=True))
    np.testing.assert_array_equal(layer(x), x)
    assert [v.name for v in layer.variables] == [v.name for v in keras.layers.Dropout(0.2).variables]


@pytest.mark.parametrize("kernel", ["gelu", "compiled_gelu", "cross_entropy"])
def test_written_out_gradients_leave_no_graph_behind(kernel):
    """A graph traced with one of the kernels' custom gradients is freed
    with its function (tf.custom_gradient keeps every such graph, and the
    variables it captured, in TensorFlow's gradient registry for good), and
    its gradient is still the written-out one."""
    import gc
    import weakref
    from tensorflow.python.framework import ops as tf_ops

    def loss(h):
        if kernel == "cross_entropy":
            return kernels.token_cross_entropy(h, tf.constant([1, 3]))[0]
        return getattr(kernels, kernel)(h)

    registry = tf_ops._gradient_registry._registry  # what tf.custom_gradient fills
    before, graphs = len(registry), []
    x = tf.constant(RNG.normal(size=(2, 512)).astype("float32"))

    @tf.function
    def step(h):
        graphs.append(weakref.ref(tf.compat.v1.get_default_graph()))
        with tf.GradientTape() as tape:
            tape.watch(h)
            out = loss(h)
        return tape.gradient(out, h)

    got = step(x).numpy()
    del step
    gc.collect()
    assert len(registry) == before and graphs[0]() is None
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = (keras.losses.sparse_categorical_crossentropy(tf.constant([1, 3]), x,
                                                            from_logits=True)
               if kernel == "cross_entropy" else keras.activations.gelu(x, approximate=False))
    np.testing.assert_allclose(got, tape.gradient(out, x).numpy(), rtol=1e-5, atol=1e-6)


def test_custom_gradient_falls_back_to_tensorflows_own(monkeypatch):
    """A TensorFlow without the tape API where it is now still gets the
    written-out gradient (tf.custom_gradient's)."""
    monkeypatch.setitem(sys.modules, "tensorflow.python.eager.record", None)
    calls = []
    real = tf.custom_gradient
    monkeypatch.setattr(tf, "custom_gradient", lambda f: calls.append(f) or real(f))
    x = tf.constant(RNG.normal(size=(3, 8)).astype("float32"))
    upstream = tf.constant(RNG.normal(size=(3, 8)).astype("float32"))
    got = _value_and_grads(kernels.gelu, x, [], upstream)
    want = _value_and_grads(lambda h: keras.activations.gelu(h, approximate=False), x, [],
                            upstream)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert len(calls) == 1
