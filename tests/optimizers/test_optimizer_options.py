"""`OptimizerOptions`: the optimizer arguments stated once, taken by
`create_optimizer`, `fine_tuning_optimizer` and `Task.compile` alike."""

import dataclasses
import os
import sys

import numpy as np
import pytest

from kerasbert.optimizers import AdamW
from kerasbert.optimizers import Lamb
from kerasbert.optimizers import OptimizerOptions
from kerasbert.optimizers import create_optimizer
from kerasbert.tasks import TextClassifier
from kerasbert.tasks.task import fine_tuning_optimizer

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tasks"))
from task_fixtures import micro_backbone  # noqa: E402


def config(optimizer):
    """The optimizer's config but its name (Keras numbers each instance's)."""
    return {k: v for k, v in optimizer.get_config().items() if k != "name"}


def rates(optimizer, steps):
    return np.array([float(optimizer._learning_rate(s)) for s in steps])


def test_options_are_frozen_and_refuse_bad_values_when_made():
    options = OptimizerOptions(learning_rate=1e-4, num_train_steps=10)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.learning_rate = 1.0
    with pytest.raises(ValueError, match="sgd"):
        OptimizerOptions(optimizer="sgd")
    with pytest.raises(ValueError, match="accumulation_steps"):
        OptimizerOptions(accumulation_steps=0)
    with pytest.raises(TypeError, match="momentum"):
        create_optimizer(1e-3, num_train_steps=10, momentum=0.9)


def test_create_optimizer_is_the_options_built():
    made = create_optimizer(1e-3, num_train_steps=40, warmup_steps=4, optimizer="lamb",
                            weight_decay=0.02, accumulation_steps=2)
    built = OptimizerOptions(learning_rate=1e-3, num_train_steps=40, warmup_steps=4,
                             optimizer="lamb", weight_decay=0.02, accumulation_steps=2).build()
    assert type(made) is type(built) is Lamb
    assert config(made) == config(built)
    np.testing.assert_allclose(rates(made, [0, 2, 20, 40]), [0, 5e-4, 5e-4, 0],
                               atol=1e-9)


def test_fine_tuning_optimizer_takes_options_or_keywords_alike():
    options = OptimizerOptions(learning_rate=5e-5, num_train_steps=100, warmup_ratio=0.2)
    by_options = fine_tuning_optimizer(options)
    by_keywords = fine_tuning_optimizer(learning_rate=5e-5, num_train_steps=100,
                                        warmup_ratio=0.2)
    assert config(by_options) == config(by_keywords)
    assert by_options._learning_rate.warmup_steps == 20
    # Keywords beside an options object replace its fields.
    assert fine_tuning_optimizer(options, warmup_steps=3)._learning_rate.warmup_steps == 3


def test_split_tells_optimizer_keywords_from_keras_ones():
    options, rest = OptimizerOptions.split({"learning_rate": 1e-3, "clipnorm": None,
                                            "run_eagerly": True, "jit_compile": False})
    assert (options.learning_rate, options.clipnorm, options.weight_decay) == (1e-3, None, 0.01)
    assert rest == {"run_eagerly": True, "jit_compile": False}
    base = OptimizerOptions(learning_rate=5e-5, num_train_steps=9)
    options, rest = OptimizerOptions.split({"warmup_steps": 2, "run_eagerly": True}, base)
    assert (options.learning_rate, options.num_train_steps, options.warmup_steps) == (5e-5, 9, 2)
    assert rest == {"run_eagerly": True}


def test_task_compile_takes_the_keywords_or_an_options_object():
    model = TextClassifier(micro_backbone(), num_classes=2)
    model.compile(learning_rate=4e-5, num_train_steps=30, warmup_steps=3, clipnorm=None,
                  run_eagerly=True)
    by_keywords = model.optimizer
    assert isinstance(by_keywords, AdamW) and by_keywords.global_clipnorm is None
    assert model.run_eagerly
    model.compile(optimizer=OptimizerOptions(learning_rate=4e-5, num_train_steps=30,
                                             warmup_steps=3, clipnorm=None))
    assert config(model.optimizer) == config(by_keywords)
    # Keywords beside an options object replace its fields.
    model.compile(optimizer=OptimizerOptions(learning_rate=1.0, num_train_steps=30,
                                             warmup_steps=3, clipnorm=None),
                  learning_rate=4e-5)
    assert config(model.optimizer) == config(by_keywords)
    np.testing.assert_allclose(rates(model.optimizer, [0, 15, 30]), [0, 2e-5, 0], atol=1e-10)
