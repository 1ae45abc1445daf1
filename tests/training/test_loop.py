"""TrainStep (the step `kerasbert pretrain` runs) on one device."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.models import BertBackbone
from kerasbert.tasks import BertPretrainer
from kerasbert.optimizers import AdamW
from kerasbert.training.loop import TrainStep
from kerasbert.training.strategies import resolve_strategy

from slow_marks import slow_covered_by

RNG = np.random.default_rng(0)
V, B, T, P = 50, 4, 12, 3
IDS = RNG.integers(5, V, size=(B, T)).astype("int32")
MASK = (np.arange(T)[None] < np.array([[12], [10], [8], [12]])).astype("int32")
BATCH = {
    "input_word_ids": IDS * MASK,
    "input_mask": MASK,
    "input_type_ids": (np.arange(T)[None] >= 5).astype("int32") * MASK,
    "masked_lm_positions": np.array([[1, 4, 7]] * B, "int32"),
    "masked_lm_ids": RNG.integers(5, V, size=(B, P)).astype("int32"),
    "masked_lm_weights": np.array([[1, 1, 1], [1, 1, 0], [1, 1, 1], [1, 0, 0]], "float32"),
}


def _trained(jit_compile, steps=2):
    """Weights before and after `steps` TrainSteps of an MLM-only model."""
    keras.utils.set_random_seed(1)
    strategy = resolve_strategy("auto")
    with strategy.scope():
        backbone = BertBackbone(vocabulary_size=V, num_layers=2, num_heads=2, hidden_dim=16,
                                intermediate_dim=32, max_sequence_length=T, dropout=0.0)
        model = BertPretrainer(backbone, objectives=("mlm",))
        optimizer = AdamW(learning_rate=1e-2, weight_decay=0.1)
        optimizer.build(model.trainable_variables)
    before = {v.path: v.numpy() for v in model.trainable_variables}
    step = TrainStep(strategy, model, optimizer, clipnorm=1.0, jit_compile=jit_compile)
    iterator = iter(tf.data.Dataset.from_tensors(BATCH).repeat())
    sums = [{k: float(v) for k, v in step.step(iterator).items()} for _ in range(steps)]
    after = {v.path: v.numpy() for v in model.trainable_variables}
    return before, after, sums


@pytest.mark.parametrize("jit_compile", [
    False,
    # 15 s (XLA's compile): the same checks on the XLA step; the default suite compiles
    # the pretraining TrainStep with XLA in test_tpu_paths.
    pytest.param(True, id="True", marks=slow_covered_by(
        "tests/training/test_loop.py::test_unused_variables_are_left_alone_and_the_rest_train",
        "tests/training/test_tpu_paths.py::test_the_pretraining_step_compiles_whole_on_static_shapes_in_bfloat16")),
])
def test_unused_variables_are_left_alone_and_the_rest_train(jit_compile):
    """An MLM-only run never reads the pooler: like `model.fit`, TrainStep
    leaves it alone (no weight decay either); every other variable moves."""
    before, after, sums = _trained(jit_compile)
    pooler = [p for p in before if "pooler" in p]
    assert pooler
    for path in before:
        moved = not np.array_equal(before[path], after[path])
        assert moved != (path in pooler), path
    assert sums[0]["mlm_weight_sum"] == BATCH["masked_lm_weights"].sum()
    assert sums[1]["mlm_loss_sum"] < sums[0]["mlm_loss_sum"]
    assert sums[0]["grad_norm"] > 0


# 13 s (XLA's compile): XLA and graph steps give equal weights; the default suite runs
# each of the two steps on its own.
@slow_covered_by(
    "tests/training/test_loop.py::test_unused_variables_are_left_alone_and_the_rest_train",
    "tests/training/test_tpu_paths.py::test_the_pretraining_step_compiles_whole_on_static_shapes_in_bfloat16")
def test_xla_step_equals_the_graph_step():
    _, graph, graph_sums = _trained(jit_compile=False)
    _, xla, xla_sums = _trained(jit_compile=True)
    for path in graph:
        np.testing.assert_allclose(xla[path], graph[path], rtol=1e-4, atol=1e-5, err_msg=path)
    for a, b in zip(graph_sums, xla_sums):
        for key in a:
            assert b[key] == pytest.approx(a[key], rel=1e-4, abs=1e-5), key


@pytest.mark.parametrize("error, expected", [
    (tf.errors.InvalidArgumentError(None, None, "{{function_node x}} Error in Assert: "
     "CorruptRecordError: file /d/a.tfrecord, record index 7: not a tf.train.Example"
     "\n\t [[{{node Assert}}]] [Op:IteratorGetNext]"),
     "/d/a.tfrecord record 7: not a tf.train.Example"),
    (tf.errors.InvalidArgumentError(None, None, "Error: EmptyDataError: no records: a whole "
     "pass over /d/a.tfrecord read none.\n [[{{node Assert}}]]"),
     "no records: a whole pass over /d/a.tfrecord read none."),
    (tf.errors.NotFoundError(None, None, "{{function_node __wrapped__IteratorGetNext}} "
     "/d/b.tfrecord; No such file or directory [Op:IteratorGetNext] name: "),
     "a data file cannot be read any more: /d/b.tfrecord; No such file or directory"),
])
def test_data_errors_become_one_line_usage_errors(error, expected):
    from kerasbert.errors import UsageError
    from kerasbert.training.loop import data_errors_as_usage_errors

    with pytest.raises(UsageError) as err:
        with data_errors_as_usage_errors():
            raise error
    assert str(err.value) == expected


def test_other_errors_pass_through():
    from kerasbert.training.loop import data_errors_as_usage_errors

    with pytest.raises(tf.errors.InvalidArgumentError, match="Incompatible shapes"):
        with data_errors_as_usage_errors():
            raise tf.errors.InvalidArgumentError(None, None, "Incompatible shapes")
