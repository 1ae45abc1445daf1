"""AdamW / LAMB for BERT: weight-decay exclusions, LAMB's trust ratio,
layer-wise learning-rate decay, gradient accumulation, tf.distribute."""

import importlib.util
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.layers import MaskedLMHead
from kerasbert.models import BertBackbone
from kerasbert.optimizers import AdamW
from kerasbert.optimizers import Lamb
from kerasbert.optimizers import WarmupDecaySchedule
from kerasbert.optimizers import create_optimizer
from kerasbert.optimizers import deduplicate_gradient
from kerasbert.optimizers import layer_depth

from slow_marks import slow_covered_by


@pytest.fixture(scope="module")
def bert_variables():
    """Real variables of a 2-layer BertBackbone, an untied MaskedLMHead
    (`decoder_kernel`, `output_bias`) and a Dense layer whose *layer* name
    contains "bias" (its kernel must still be decayed)."""
    keras.utils.set_random_seed(7)
    backbone = BertBackbone(
        vocabulary_size=11,
        num_layers=2,
        num_heads=2,
        hidden_dim=4,
        intermediate_dim=8,
        max_sequence_length=6,
    )
    head = MaskedLMHead(11, embedding_dim=4, name="mlm_head")
    head.build((None, None, 4))
    bias_proj = keras.layers.Dense(3, name="bias_proj")
    bias_proj.build((None, 4))
    return backbone.weights + head.weights + bias_proj.weights


def _step(optimizer, variables, grads):
    """Variable values after one `optimizer.apply`; variables are restored."""
    before = [v.numpy() for v in variables]
    optimizer.apply([tf.constant(g) for g in grads], variables)
    after = [v.numpy() for v in variables]
    for v, value in zip(variables, before):
        v.assign(value)
    return before, after


def _random_grads(variables, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=v.shape).astype("float32") for v in variables]


# --- Weight decay: which variables. ---

DECAYED_NAMES = {"embeddings", "kernel", "decoder_kernel"}


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_weight_decay_skips_layer_norm_and_biases(bert_variables, name):
    variables = bert_variables
    grads = _random_grads(variables)

    def run(weight_decay):
        # LAMB without layer adaptation isolates the decay term.
        extra = {}
        if name == "lamb":
            extra = {"exclude_from_layer_adaptation": [".*"]}
        cls = AdamW if name == "adamw" else Lamb
        return _step(
            cls(learning_rate=0.1, weight_decay=weight_decay, **extra),
            variables,
            grads,
        )

    before, with_decay = run(0.01)
    _, without_decay = run(0.0)
    decayed = set()
    for v, w0, a, b in zip(variables, before, with_decay, without_decay):
        if np.any(a != b):
            decayed.add(v.path)
            # Decoupled: w -= lr * wd * w, on top of the same Adam update.
            np.testing.assert_allclose(a - b, -0.1 * 0.01 * w0, atol=1e-7)
    expected = {v.path for v in variables if v.name in DECAYED_NAMES}
    assert decayed == expected
    for path in [
        "embeddings/token_embedding/embeddings",
        "transformer_layer_1/intermediate/kernel",
        "mlm_head/decoder_kernel",
        "bias_proj/kernel",
    ]:
        assert path in decayed
    for path in [
        "embeddings/layer_norm/gamma",
        "transformer_layer_0/attention/qkv/bias",
        "transformer_layer_0/output_layer_norm/beta",
        "mlm_head/output_bias",
        "mlm_head/transform_layer_norm/gamma",
        "pooler/dense/bias",
    ]:
        assert path in {v.path for v in variables} and path not in decayed


def test_custom_exclusions_round_trip():
    optimizer = AdamW(exclude_from_weight_decay=["kernel"])
    config = keras.optimizers.serialize(optimizer)
    restored = keras.optimizers.deserialize(config)
    assert restored.get_config()["exclude_from_weight_decay"] == ["kernel"]
    kernel = keras.Variable(np.ones((2, 2)), name="kernel")
    bias = keras.Variable(np.ones((2,)), name="bias")
    restored.build([kernel, bias])
    assert not restored.uses_weight_decay(kernel)
    assert restored.uses_weight_decay(bias)


# --- LAMB. ---


def test_lamb_trust_ratio_matches_hand_computation():
    lr, wd, eps = 0.1, 0.1, 1e-6
    kernel = keras.Variable(np.array([[3.0, 4.0]], "float32"), name="kernel")
    bias = keras.Variable(np.array([1.0, -2.0], "float32"), name="bias")
    g_kernel = np.array([[1.0, -2.0]], "float32")
    g_bias = np.array([0.5, 0.5], "float32")
    optimizer = Lamb(learning_rate=lr, weight_decay=wd, epsilon=eps)
    optimizer.apply(
        [tf.constant(g_kernel), tf.constant(g_bias)], [kernel, bias]
    )

    # First step: bias-corrected moments are m = g, v = g^2.
    u = g_kernel / (np.abs(g_kernel) + eps) + wd * np.array([[3.0, 4.0]])
    ratio = 5.0 / np.linalg.norm(u)  # ||w|| = 5
    np.testing.assert_allclose(
        kernel.numpy(), [[3.0, 4.0]] - lr * ratio * u, rtol=1e-5
    )
    # Bias: no decay and no layer adaptation (ratio 1).
    np.testing.assert_allclose(
        bias.numpy(),
        [1.0, -2.0] - lr * g_bias / (np.abs(g_bias) + eps),
        rtol=1e-5,
    )


def test_lamb_ratio_is_one_for_zero_weights_and_exclusions_round_trip():
    kernel = keras.Variable(np.zeros((2,), "float32"), name="kernel")
    optimizer = Lamb(
        learning_rate=0.5, weight_decay=0.0, exclude_from_layer_adaptation=["x"]
    )
    optimizer.apply([tf.constant([2.0, -3.0])], [kernel])
    np.testing.assert_allclose(kernel.numpy(), [-0.5, 0.5], rtol=1e-5)
    config = optimizer.get_config()
    assert config["exclude_from_layer_adaptation"] == ["x"]
    assert Lamb.from_config(config).get_config() == config


# --- Layer-wise learning-rate decay. ---


def test_layer_depth_on_real_backbone_paths(bert_variables):
    depths = {v.path: layer_depth(v.path, 2) for v in bert_variables}
    assert depths["embeddings/token_embedding/embeddings"] == 0
    assert depths["embeddings/layer_norm/gamma"] == 0
    assert depths["transformer_layer_0/attention/qkv/kernel"] == 1
    assert depths["transformer_layer_1/output_layer_norm/beta"] == 2
    assert depths["pooler/dense/kernel"] == 3
    assert depths["mlm_head/output_bias"] == 3
    assert set(depths.values()) == {0, 1, 2, 3}
    # Nested in a task model, keras-hub names, TF variable names.
    assert layer_depth("pretrainer/transformer_layer_1/output/bias", 2) == 2
    assert layer_depth("token_embedding/embeddings", 2) == 0
    assert layer_depth("embeddings_layer_norm/gamma", 2) == 0
    assert layer_depth("transformer_layer_0/intermediate/kernel:0", 2) == 1
    assert layer_depth("classifier/embeddings", 2) == 3
    with pytest.raises(ValueError, match="transformer layer 2"):
        layer_depth("transformer_layer_2/output/kernel", 2)


@pytest.mark.parametrize("num_layers", [2, None])
def test_layer_decay_scales_the_learning_rate_per_depth(
    bert_variables, num_layers
):
    variables = bert_variables
    lr, decay = 0.01, 0.5
    # Adam's first step moves every entry by lr * g / |g| (up to epsilon),
    # whatever the gradient's scale: the update is the learning rate.
    grads = [np.full(v.shape, 3.0, "float32") for v in variables]
    optimizer = AdamW(
        learning_rate=lr,
        weight_decay=0.0,
        epsilon=1e-12,
        layer_decay=decay,
        num_layers=num_layers,
    )
    before, after = _step(optimizer, variables, grads)
    expected_factor = {0: 0.125, 1: 0.25, 2: 0.5, 3: 1.0}  # 0.5 ** (3 - d)
    for v, w0, w1 in zip(variables, before, after):
        factor = expected_factor[layer_depth(v.path, 2)]
        np.testing.assert_allclose(w1 - w0, -lr * factor, rtol=1e-4)


def test_layer_decay_also_scales_weight_decay(bert_variables):
    variables = bert_variables
    lr, wd = 0.1, 0.1
    zeros = [np.zeros(v.shape, "float32") for v in variables]
    optimizer = AdamW(learning_rate=lr, weight_decay=wd, layer_decay=0.5)
    before, after = _step(optimizer, variables, zeros)
    by_path = {v.path: (w0, w1) for v, w0, w1 in zip(variables, before, after)}
    for path, factor in [
        ("embeddings/position_embedding/embeddings", 0.125),
        ("transformer_layer_0/intermediate/kernel", 0.25),
        ("transformer_layer_1/attention/qkv/kernel", 0.5),
        ("pooler/dense/kernel", 1.0),
    ]:
        w0, w1 = by_path[path]
        np.testing.assert_allclose(w1 - w0, -lr * factor * wd * w0, atol=1e-8)
    w0, w1 = by_path["transformer_layer_0/attention_layer_norm/gamma"]
    np.testing.assert_array_equal(w0, w1)


def test_layer_decay_without_transformer_layers_needs_num_layers():
    optimizer = AdamW(layer_decay=0.8)
    with pytest.raises(ValueError, match="num_layers"):
        optimizer.build([keras.Variable(np.ones(2), name="kernel")])


# --- create_optimizer and serialization. ---


@pytest.mark.parametrize("name, cls", [("adamw", AdamW), ("LAMB", Lamb)])
def test_create_optimizer_recipe_and_round_trip(name, cls):
    optimizer = create_optimizer(
        1e-4,
        num_train_steps=100,
        warmup_steps=10,
        optimizer=name,
        accumulation_steps=4,
        layer_decay=0.8,
        num_layers=12,
    )
    assert type(optimizer) is cls
    assert optimizer.global_clipnorm == 1.0 and optimizer.clipnorm is None
    assert optimizer.gradient_accumulation_steps == 4
    assert optimizer.weight_decay == 0.01
    assert optimizer.epsilon == 1e-6
    assert isinstance(optimizer._learning_rate, WarmupDecaySchedule)
    config = keras.optimizers.serialize(optimizer)
    restored = keras.optimizers.deserialize(config)
    assert type(restored) is cls
    assert restored.get_config() == optimizer.get_config()
    assert restored.layer_decay == 0.8 and restored.num_layers == 12


def test_create_optimizer_rejects_unknown_names():
    with pytest.raises(ValueError, match="sgd"):
        create_optimizer(1e-3, num_train_steps=10, optimizer="sgd")
    with pytest.raises(ValueError, match="accumulation_steps"):
        create_optimizer(1e-3, num_train_steps=10, accumulation_steps=0)


def test_saved_model_file_keeps_the_optimizer(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(
        create_optimizer(
            1e-3, num_train_steps=10, layer_decay=0.9, num_layers=1
        ),
        "mse",
    )
    model.fit(np.ones((4, 3)), np.ones((4, 2)), verbose=0)
    path = str(tmp_path / "model.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert type(restored.optimizer) is AdamW
    assert restored.optimizer.get_config() == model.optimizer.get_config()


# --- Embedding (IndexedSlices) gradients. ---


def _two_clipped_steps(optimizer, sparse):
    """Two updates of an embedding table, the first with token 0 seen
    twice; returns the table. `sparse` feeds the gradient as IndexedSlices
    (what an Embedding layer produces under TF), else as its dense value."""
    table = keras.Variable(np.ones((3, 2), "float32"), name="embeddings")
    first = tf.IndexedSlices(
        tf.constant([[1.0, 0.0], [1.0, 0.0], [0.0, 2.0]]),
        tf.constant([0, 0, 2]),
        tf.constant([3, 2]),
    )
    second = tf.constant([[0.0, 1.0], [3.0, 0.0], [0.0, 0.0]])
    optimizer.apply([first if sparse else tf.convert_to_tensor(first)], [table])
    optimizer.apply([second], [table])
    return table.numpy()


@pytest.mark.parametrize("clipnorm", [None, 0.1])
def test_repeated_embedding_rows_update_as_the_dense_gradient(clipnorm):
    def ours():
        return AdamW(
            learning_rate=0.1, weight_decay=0.0, global_clipnorm=clipnorm
        )

    np.testing.assert_allclose(
        _two_clipped_steps(ours(), sparse=True),
        _two_clipped_steps(ours(), sparse=False),
        rtol=1e-6,
    )

    def plain():
        return keras.optimizers.Adam(
            learning_rate=0.1, global_clipnorm=clipnorm
        )

    # Keras 3.15 uses the raw slices (second moment 1 + 1 instead of 2 ** 2
    # for row 0; global norm sqrt(6) instead of sqrt(8)). If this starts
    # failing, Keras fixed it.
    assert not np.allclose(
        _two_clipped_steps(plain(), sparse=True),
        _two_clipped_steps(plain(), sparse=False),
        rtol=1e-6,
    )


def test_global_norm_clipping_scales_embedding_rows_without_densifying():
    """The global norm counts an embedding's IndexedSlices by its rows and
    scales them as rows (the dense [V, H] table is never built); the result
    is Keras's clip of the dense gradients."""
    rows = tf.IndexedSlices(tf.constant([[3.0, 0.0], [0.0, 4.0]]), tf.constant([0, 2]),
                            tf.constant([3, 2]))
    dense = tf.constant([[0.0, 12.0]])
    clipped = AdamW(global_clipnorm=1.0)._clip_gradients([rows, None, dense])
    assert isinstance(clipped[0], tf.IndexedSlices) and clipped[1] is None
    np.testing.assert_array_equal(clipped[0].indices, [0, 2])
    expected = keras.optimizers.Adam(global_clipnorm=1.0)._clip_gradients(
        [tf.convert_to_tensor(rows), dense])
    np.testing.assert_allclose(tf.convert_to_tensor(clipped[0]), expected[0], rtol=1e-6)
    np.testing.assert_allclose(clipped[2], expected[1], rtol=1e-6)
    np.testing.assert_allclose(clipped[2], [[0.0, 12.0 / 13.0]], rtol=1e-6)
    # Below the threshold nothing changes; a non-finite norm gives NaN, as in Keras.
    unclipped = AdamW(global_clipnorm=20.0)._clip_gradients([rows, dense])
    np.testing.assert_allclose(unclipped[1], dense)
    bad = AdamW(global_clipnorm=1.0)._clip_gradients([tf.constant([np.inf, 1.0])])
    assert np.isnan(bad[0].numpy()).all()


@pytest.mark.parametrize("jit_compile", [False, True])
def test_fused_adamw_step_equals_keras_adamw(bert_variables, monkeypatch, jit_compile):
    """Under TensorFlow our AdamW updates each float32 variable with one
    ResourceApplyAdam kernel; three steps (weight decay with the
    exclusions, an IndexedSlices gradient from an embedding lookup) give
    what keras.optimizers.AdamW gives, with and without XLA."""
    calls = []
    fused = tf.raw_ops.ResourceApplyAdam

    def counting(**kwargs):
        calls.append(1)
        return fused(**kwargs)

    monkeypatch.setattr(tf.raw_ops, "ResourceApplyAdam", counting)
    # Not the Dense layer named "bias_proj": Keras matches "bias" in its
    # full TF name and skips its decay (ours decays its kernel).
    bert_variables = [v for v in bert_variables if "bias_proj" not in v.path]
    start = [v.numpy() for v in bert_variables]
    grads = _random_grads(bert_variables, seed=3)
    table_index = next(i for i, v in enumerate(bert_variables)
                       if v.path.endswith("token_embedding/embeddings"))

    def run(optimizer):
        for v, value in zip(bert_variables, start):
            v.assign(value)
        optimizer.build(bert_variables)

        @tf.function(jit_compile=jit_compile)
        def step(scale):
            step_grads = [tf.constant(g) * scale for g in grads]
            # The token table's gradient as an embedding lookup gives it
            # (distinct rows: Keras mishandles repeated ones, see below).
            rows = tf.constant([3, 1, 0])
            step_grads[table_index] = tf.IndexedSlices(
                tf.gather(step_grads[table_index], rows), rows,
                tf.shape(step_grads[table_index]))
            optimizer.apply(step_grads, bert_variables)

        for scale in (1.0, -0.5, 2.0):
            step(tf.constant(scale))
        return [v.numpy() for v in bert_variables]

    theirs = keras.optimizers.AdamW(learning_rate=0.01, weight_decay=0.1, epsilon=1e-6)
    theirs.exclude_from_weight_decay(var_names=["gamma", "beta", "bias"])
    expected = run(theirs)
    assert not calls
    got = run(AdamW(learning_rate=0.01, weight_decay=0.1, epsilon=1e-6))
    assert calls, "the fused kernel was not used"
    for v, a, b in zip(bert_variables, got, expected):
        # Float rounding only: 1e-6 is 1e-4 of one step (lr 0.01).
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=v.path)
    # The one switch: off, Keras' own update runs, with the same result.
    calls.clear()
    monkeypatch.setenv("KERASBERT_TF_OPTIMIZER_PATHS", "0")
    plain = run(AdamW(learning_rate=0.01, weight_decay=0.1, epsilon=1e-6))
    assert not calls, "the fused kernel ran with the TensorFlow paths switched off"
    for v, a, b in zip(bert_variables, plain, expected):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=v.path)
    for v, value in zip(bert_variables, start):
        v.assign(value)


def test_deduplicate_gradient_sums_repeated_rows():
    slices = tf.IndexedSlices(
        tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),
        tf.constant([2, 0, 2]),
        tf.constant([4, 2]),
    )
    unique = deduplicate_gradient(slices)
    assert sorted(unique.indices.numpy().tolist()) == [0, 2]
    np.testing.assert_array_equal(
        tf.convert_to_tensor(unique), tf.convert_to_tensor(slices)
    )
    dense = tf.ones((2, 2))
    assert deduplicate_gradient(dense) is dense
    assert deduplicate_gradient(None) is None


# --- Gradient accumulation. ---


def _dense_model():
    keras.utils.set_random_seed(3)
    inputs = keras.Input((4,))
    x = keras.layers.Dense(8, activation="tanh", name="transformer_layer_0")(
        inputs
    )
    x = keras.layers.LayerNormalization(name="layer_norm")(x)
    return keras.Model(inputs, keras.layers.Dense(1, name="head")(x))


def _regression_data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 4)).astype("float32")
    return x, (3.0 * x[:, :1] + rng.normal(size=(16, 1))).astype("float32")


def _optimizer(kind, accumulation_steps):
    if kind == "sgd":
        return keras.optimizers.SGD(
            0.1,
            gradient_accumulation_steps=(
                accumulation_steps if accumulation_steps > 1 else None
            ),
        )
    # A schedule that changes at every update, and active clipping: both
    # only agree if the schedule counts updates, not micro-steps.
    return create_optimizer(
        0.05,
        num_train_steps=4,
        warmup_steps=1,
        optimizer=kind,
        clipnorm=0.5,
        layer_decay=0.5,
        accumulation_steps=accumulation_steps,
    )


@pytest.mark.parametrize("kind", ["sgd", "adamw", "lamb"])
def test_accumulated_steps_equal_one_big_batch_in_fit(kind):
    x, y = _regression_data()
    small = _dense_model()
    small.compile(_optimizer(kind, 2), "mse")
    small.fit(x, y, batch_size=4, shuffle=False, verbose=0)
    big = _dense_model()
    big.compile(_optimizer(kind, 1), "mse")
    big.fit(x, y, batch_size=8, shuffle=False, verbose=0)
    # 4 micro-batches of 4 = 2 updates, like 2 batches of 8.
    assert int(small.optimizer.iterations) == 2
    assert int(small.optimizer._iterations) == 4
    assert int(big.optimizer.iterations) == 2
    for a, b in zip(small.get_weights(), big.get_weights()):
        np.testing.assert_allclose(a, b, atol=2e-6)
    assert any(
        np.abs(a - b).max() > 1e-3
        for a, b in zip(small.get_weights(), _dense_model().get_weights())
    )


def test_accumulation_in_a_custom_tf_function_step():
    x, y = _regression_data()

    def train(batch_size, accumulation_steps):
        model = _dense_model()
        optimizer = _optimizer("adamw", accumulation_steps)
        optimizer.build(model.trainable_variables)

        @tf.function
        def step(xb, yb):
            with tf.GradientTape() as tape:
                loss = keras.ops.mean(keras.ops.square(model(xb) - yb))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply(grads, model.trainable_variables)

        for start in range(0, len(x), batch_size):
            step(x[start : start + batch_size], y[start : start + batch_size])
        return model, optimizer

    small, small_opt = train(4, 2)
    big, big_opt = train(8, 1)
    assert int(small_opt.iterations) == int(big_opt.iterations) == 2
    for a, b in zip(small.get_weights(), big.get_weights()):
        np.testing.assert_allclose(a, b, atol=2e-6)


def test_schedule_sees_updates_not_micro_steps():
    """Keras 3 calls a schedule with its micro-step counter under
    accumulation; our optimizers pass the number of updates."""
    schedule = WarmupDecaySchedule(1.0, warmup_steps=4, decay_steps=8)
    variable = keras.Variable(np.ones(2, "float32"), name="kernel")
    ours = AdamW(learning_rate=schedule, gradient_accumulation_steps=2)
    plain = keras.optimizers.AdamW(
        learning_rate=schedule, gradient_accumulation_steps=2
    )
    for optimizer in (ours, plain):
        for _ in range(2):  # 2 micro-steps = 1 update
            optimizer.apply([tf.ones(2)], [variable])
    assert float(ours.learning_rate) == pytest.approx(float(schedule(1)))
    # If this starts failing, Keras has changed what its schedules see.
    assert float(plain.learning_rate) == pytest.approx(float(schedule(2)))


# --- tf.distribute and JAX, in fresh processes. ---

MIRRORED_SCRIPT = """
import numpy as np, tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from kerasbert.optimizers import create_optimizer

def model(kind, accumulation_steps, strategy):
    with strategy.scope():
        keras.utils.set_random_seed(0)
        ids = keras.Input((3,), dtype="int32")
        x = keras.layers.Embedding(20, 4, name="token_embedding")(ids)
        x = keras.layers.GlobalAveragePooling1D()(x)
        x = keras.layers.Dense(8, activation="tanh",
                               name="transformer_layer_0")(x)
        x = keras.layers.LayerNormalization(name="layer_norm")(x)
        m = keras.Model(ids, keras.layers.Dense(1, name="head")(x))
        # clipnorm small enough to clip every update.
        m.compile(create_optimizer(1e-2, num_train_steps=10, warmup_steps=1,
                  optimizer=kind, clipnorm=1e-3,
                  accumulation_steps=accumulation_steps,
                  layer_decay=0.5), "mse")
    return m

rng = np.random.default_rng(0)
x = rng.integers(0, 20, size=(16, 3)).astype("int32")
y = 10 * rng.normal(size=(16, 1)).astype("float32")
mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
for kind, steps in (("adamw", 2), ("lamb", 1)):
    ref = model(kind, steps, tf.distribute.get_strategy())
    ref.fit(x, y, batch_size=4, shuffle=False, verbose=0)
    dist = model(kind, steps, mirrored)
    dist.fit(x, y, batch_size=4, shuffle=False, verbose=0)
    assert int(dist.optimizer.iterations.numpy()) == 4 // steps
    diff = max(float(np.abs(a - b).max())
               for a, b in zip(dist.get_weights(), ref.get_weights()))
    assert diff < 1e-6, (kind, steps, diff)
    print(kind, steps, diff)
print("ok")
"""


def _run_script(script, **env):
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=dict(os.environ, **env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


# A second process on 2 logical CPUs with every option at once; the default
# suite covers the strategy path through the pretrain CLI and BertPretrainer.
@slow_covered_by("tests/tasks/test_bert_pretrainer.py::test_mirrored_strategy_matches_single_device",
                 "tests/optimizers/test_optimizers.py::test_accumulation_and_layer_decay_under_jax")
def test_mirrored_strategy_matches_one_device():
    """2 logical CPUs, an embedding with repeated ids, LLRD, global-norm
    clipping active at every update; AdamW with accumulation 2, LAMB
    without. Keras alone fails with accumulation (merge_call inside its
    cond), clips each replica's partial gradient, and re-duplicates
    all-reduced embedding rows; ours matches one device to 1e-6."""
    out = _run_script(MIRRORED_SCRIPT, KERAS_BACKEND="tensorflow")
    assert out.strip().endswith("ok"), out


JAX_SCRIPT = """
import numpy as np, keras
assert keras.config.backend() == "jax"
from kerasbert.optimizers import create_optimizer

def run(accumulation_steps, batch_size):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    x = keras.layers.Dense(8, activation="tanh",
                           name="transformer_layer_0")(inputs)
    x = keras.layers.LayerNormalization(name="layer_norm")(x)
    m = keras.Model(inputs, keras.layers.Dense(1, name="head")(x))
    m.compile(create_optimizer(1e-2, num_train_steps=4, warmup_steps=1,
              clipnorm=1e-3, layer_decay=0.5,
              accumulation_steps=accumulation_steps), "mse")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 4)).astype("float32")
    m.fit(x, x[:, :1], batch_size=batch_size, shuffle=False, verbose=0)
    return m

a, b = run(2, 4), run(1, 8)
assert int(a.optimizer.iterations) == int(b.optimizer.iterations) == 2
diff = max(float(np.abs(u - v).max())
           for u, v in zip(a.get_weights(), b.get_weights()))
assert diff < 1e-5, diff
print("ok")
"""


@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None, reason="jax is not installed"
)
def test_accumulation_and_layer_decay_under_jax():
    out = _run_script(JAX_SCRIPT, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    assert out.strip().endswith("ok"), out
