"""The shared Task base: backbone inputs, dtype policy, the fine-tuning
optimizer (`compile(optimizer="auto")`) and its schedules."""

import os
import sys

import keras
import numpy as np
import pytest

from kerasbert.tasks import TextClassifier
from kerasbert.tasks.task import backbone_inputs
from kerasbert.tasks.task import fine_tuning_optimizer
from kerasbert.optimizers import AdamW

sys.path.insert(0, os.path.dirname(__file__))
from task_fixtures import micro_backbone  # noqa: E402


def rates(optimizer, steps):
    schedule = optimizer._learning_rate
    return np.array([float(schedule(s)) for s in steps])


def test_schedule_with_known_total():
    opt = fine_tuning_optimizer(learning_rate=1e-4, num_train_steps=100, warmup_ratio=0.1)
    # Warm-up over 10 updates, then linear decay to 0 at update 100.
    np.testing.assert_allclose(rates(opt, [0, 5, 50, 100, 150]),
                               [0, 5e-5, 5e-5, 0, 0], atol=1e-9)
    opt = fine_tuning_optimizer(learning_rate=1e-4, num_train_steps=100, warmup_steps=20)
    assert opt._learning_rate.warmup_steps == 20
    with pytest.raises(ValueError, match="warmup_ratio"):
        fine_tuning_optimizer(num_train_steps=100, warmup_ratio=1.5)
    with pytest.raises(ValueError, match="num_train_steps"):
        fine_tuning_optimizer(num_train_steps=0)


def test_schedule_with_unknown_total_is_constant_after_warmup():
    opt = fine_tuning_optimizer(learning_rate=3e-5)
    np.testing.assert_allclose(rates(opt, [0, 1, 10_000]), 3e-5, rtol=1e-6)
    opt = fine_tuning_optimizer(learning_rate=3e-5, warmup_steps=10)
    np.testing.assert_allclose(rates(opt, [0, 5, 10, 10_000]),
                               [0, 1.5e-5, 3e-5, 3e-5], rtol=1e-6)


def test_compile_auto_builds_adamw_with_exclusions_and_layer_decay():
    model = TextClassifier(micro_backbone(), num_classes=2)
    model.compile(num_train_steps=50, learning_rate=5e-5, layer_decay=0.8)
    opt = model.optimizer
    assert isinstance(opt, AdamW)
    assert opt.weight_decay == pytest.approx(0.01) and opt.global_clipnorm == 1.0
    opt.build(model.trainable_variables)
    decayed = {w.path for w in model.trainable_weights if opt.uses_weight_decay(w)}
    assert any(p.endswith("logits/kernel") for p in decayed)
    assert not any(p.endswith(("bias", "gamma", "beta")) for p in decayed)
    # The head trains at the full rate, the embeddings at 0.8 ** (L + 1).
    head = next(w for w in model.trainable_weights if w.path.endswith("logits/kernel"))
    emb = next(w for w in model.trainable_weights if "token_embedding" in w.path)
    assert float(opt.variable_learning_rate(head, 1.0)) == pytest.approx(1.0)
    assert float(opt.variable_learning_rate(emb, 1.0)) == pytest.approx(0.8 ** 2)
    # A user's optimizer and loss pass through.
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", metrics=[])
    assert isinstance(model.optimizer, keras.optimizers.SGD)


def test_backbone_inputs():
    ids = np.array([[1, 5, 2]], "int64")
    features = backbone_inputs({"input_word_ids": ids, "input_mask": np.ones_like(ids),
                                "label": np.array([1])})
    assert set(features) == {"input_word_ids", "input_mask", "input_type_ids"}
    assert all(v.dtype == "int32" for v in features.values())
    np.testing.assert_array_equal(features["input_type_ids"], [[0, 0, 0]])
    with pytest.raises(KeyError, match="input_mask"):
        backbone_inputs({"input_word_ids": ids})
    with pytest.raises(TypeError, match="dict"):
        backbone_inputs(ids)


def test_dtype_policy_follows_the_backbone():
    model = TextClassifier(micro_backbone(dtype="mixed_bfloat16"), num_classes=2)
    assert model.dtype_policy.name == "mixed_bfloat16"
    assert model.output_dense.dtype_policy.name == "mixed_bfloat16"
    with pytest.raises(ValueError, match="dropout"):
        TextClassifier(micro_backbone(), num_classes=2, dropout=1.0)
