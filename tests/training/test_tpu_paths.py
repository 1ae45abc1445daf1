"""What TPUStrategy needs of a training step, checked on the CPU as far as
TensorFlow allows (issue 35, item 4): the step XLA-compiles
(`jit_compile=True`, as on a TPU, where everything is XLA) on static shapes
(the reader's drop_remainder batches), in bfloat16, and its traced graph
holds no `tf.py_function` (a TPU cannot run Python). The fine-tuning step
also runs with `steps_per_execution`. No TPU is at hand, so TPUStrategy
itself is not built here (tests/training/test_strategy_refusals.py: it is
refused in one line)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import pretrain_data as pd
from kerasbert.data import pretraining_dataset
from kerasbert.models import BertBackbone
from kerasbert.optimizers import AdamW
from kerasbert.tasks import BertPretrainer
from kerasbert.tasks import TextClassifier
from kerasbert.training.loop import TrainStep
from kerasbert.training.strategies import resolve_strategy

from slow_marks import slow_covered_by

PYTHON_OPS = {"PyFunc", "PyFuncStateless", "EagerPyFunc"}


def _tiny_backbone(vocabulary_size, dtype):
    return BertBackbone(vocabulary_size=vocabulary_size, num_layers=1, num_heads=2,
                        hidden_dim=16, intermediate_dim=32, max_sequence_length=32,
                        dtype=dtype)


def _graph_ops(concrete):
    """{function name (or "" for the outer graph): {op types}} of a traced
    function and of every function it calls (the graph's library)."""
    graph_def = concrete.graph.as_graph_def()
    ops = {"": {node.op for node in graph_def.node}}
    for function in graph_def.library.function:
        ops[function.signature.name] = {node.op for node in function.node_def}
    xla = {f.signature.name for f in graph_def.library.function
           if f.attr["_XlaMustCompile"].b}
    return ops, xla


def _static(element_spec):
    return all(spec.shape.is_fully_defined() for spec in tf.nest.flatten(element_spec))


@pytest.fixture(autouse=True)
def _float32_policy_after():
    yield
    keras.mixed_precision.set_dtype_policy("float32")


def test_the_pretraining_step_compiles_whole_on_static_shapes_in_bfloat16(tmp_path):
    vocab, shards = pd.make_data(str(tmp_path), sequence_length=32, predictions=5,
                                 dupe_factor=1, num_shards=1)
    dataset = pretraining_dataset(shards, 8, seed=0)
    assert _static(dataset.element_spec), dataset.element_spec  # batch dimension included

    keras.utils.set_random_seed(0)
    strategy = resolve_strategy("cpu")
    with strategy.scope():
        keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
        vocabulary_size = sum(1 for _ in open(vocab, encoding="utf-8"))
        model = BertPretrainer(_tiny_backbone(vocabulary_size, "mixed_bfloat16"))
        optimizer = AdamW(learning_rate=1e-3, weight_decay=0.01)
        optimizer.build(model.trainable_variables)
    step = TrainStep(strategy, model, optimizer, clipnorm=1.0, jit_compile=True)
    iterator = iter(dataset)
    sums = [step.step(iterator) for _ in range(2)]
    assert all(np.isfinite(float(s["mlm_loss_sum"])) for s in sums)
    assert model.backbone.compute_dtype == "bfloat16"

    ops, xla = _graph_ops(step.step.get_concrete_function(iterator))
    assert step.step.experimental_get_tracing_count() == 1  # one shape: one program
    assert not {name: found & PYTHON_OPS for name, found in ops.items() if found & PYTHON_OPS}
    # One replica: forward, backward, clipping and the update are one XLA program.
    assert xla and any("AssignVariableOp" in ops[name] or "AssignSubVariableOp" in ops[name]
                       for name in xla), (xla, ops)


# 14 s (XLA's compile): model.fit's loop of steps_per_execution XLA-compiled in
# bfloat16; the default suite compiles the pretraining step the same way.
@slow_covered_by(
    "tests/training/test_tpu_paths.py::test_the_pretraining_step_compiles_whole_on_static_shapes_in_bfloat16",
    "tests/training/test_tpu_paths.py::test_the_graph_walk_sees_a_py_function_and_xla",
    "tests/tasks/test_bert_pretrainer.py::TestBertPretrainer::test_mixed_precision_fit")
def test_the_fine_tuning_step_compiles_with_steps_per_execution():
    rng = np.random.default_rng(0)
    n, length = 12, 16
    features = {"input_word_ids": rng.integers(5, 50, (n, length)).astype("int32"),
                "input_mask": np.ones((n, length), "int32"),
                "input_type_ids": np.zeros((n, length), "int32")}
    dataset = tf.data.Dataset.from_tensor_slices(
        (features, rng.integers(0, 2, n))).batch(4, drop_remainder=True)
    assert _static(dataset.element_spec)

    keras.utils.set_random_seed(0)
    keras.mixed_precision.set_dtype_policy("mixed_bfloat16")
    model = TextClassifier(_tiny_backbone(50, "mixed_bfloat16"), num_classes=2)
    model.compile(jit_compile=True, steps_per_execution=3)
    history = model.fit(dataset, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()

    # Keras' train function is a plain wrapper around the tf.function that
    # runs `steps_per_execution` steps in a tf.while_loop; that loop's graph
    # library holds every function it calls.
    loops = [cell.cell_contents for cell in model.train_function.__closure__
             if hasattr(cell.cell_contents, "get_concrete_function")]
    assert len(loops) == 1, loops
    concrete = loops[0].get_concrete_function(iter(dataset))
    assert "While" in {n.op for n in concrete.graph.as_graph_def().node} | {
        n.op for f in concrete.graph.as_graph_def().library.function for n in f.node_def}
    ops, xla = _graph_ops(concrete)
    assert not {name: found & PYTHON_OPS for name, found in ops.items() if found & PYTHON_OPS}
    assert xla, "the train step is not XLA-compiled"


def test_the_graph_walk_sees_a_py_function_and_xla():
    """The two tests above would notice: a py_function in a nested
    function, and which functions XLA compiles."""
    inner = tf.function(lambda x: tf.py_function(np.square, [x], tf.float32), jit_compile=False)
    outer = tf.function(lambda x: inner(x) + tf.function(lambda y: y * 2, jit_compile=True)(x))
    ops, xla = _graph_ops(outer.get_concrete_function(tf.TensorSpec([2], tf.float32)))
    assert any(found & PYTHON_OPS for found in ops.values())
    assert len(xla) == 1
