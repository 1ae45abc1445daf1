"""TextClassifier: outputs, defaults, config and .keras round trips, half
precision, and learning single-text, pair and regression tasks."""

import os
import sys

import keras
import numpy as np
import pytest

from kerasbert.tasks import StreamingPearsonCorrelation
from kerasbert.tasks import TextClassifier
from kerasbert.testing import TestCase

sys.path.insert(0, os.path.dirname(__file__))
from task_fixtures import marker_in_segment_b  # noqa: E402
from task_fixtures import micro_backbone  # noqa: E402
from task_fixtures import random_features  # noqa: E402
from task_fixtures import tiny_backbone  # noqa: E402
from task_fixtures import token_fraction  # noqa: E402
from task_fixtures import token_presence  # noqa: E402

B, T = 4, 12


def features(seed=0):
    return random_features(np.random.RandomState(seed), B, T)


class TestTextClassifier(TestCase):
    def test_outputs_and_defaults(self):
        model = TextClassifier(micro_backbone(), num_classes=3)
        x = features()
        logits = model(x)
        assert tuple(logits.shape) == (B, 3) and logits.dtype == "float32"
        # input_type_ids default to zeros; int64 (TFRecord) ids are cast.
        no_types = {k: v.astype("int64") for k, v in x.items() if k != "input_type_ids"}
        self.assertAllClose(logits, model(no_types), atol=1e-6)
        model.compile()
        assert isinstance(model.loss, keras.losses.SparseCategoricalCrossentropy)
        assert model.loss.get_config()["from_logits"]
        assert model.dropout == 0.1
        with pytest.raises(ValueError, match="num_classes"):
            TextClassifier(micro_backbone(), num_classes=0)

    def test_regression_outputs_and_defaults(self):
        model = TextClassifier(micro_backbone(), num_classes=1)
        assert model.is_regression
        assert tuple(model(features()).shape) == (B, 1)
        model.compile(run_eagerly=True)
        assert isinstance(model.loss, keras.losses.MeanSquaredError)
        y = np.linspace(0, 1, B).astype("float32")
        logs = model.fit(features(), y, batch_size=B, verbose=0).history
        assert {"loss", "mae", "pearson"} <= set(logs)

    def test_task_basics(self):
        # Round trips (optimizer state and schedule too), one fit step, half
        # precision with a fully padded row: the shared task checks.
        model = TextClassifier(micro_backbone(), num_classes=2, dropout=0.2)
        restored = self.run_task_test(model, features(), np.array([0, 1, 1, 0], "int32"),
                                      compile_kwargs={"num_train_steps": 10})
        assert restored.num_classes == 2 and restored.dropout == 0.2
        assert restored.optimizer._learning_rate.decay_steps == 10


def test_streaming_pearson_is_exact_over_batches():
    rng = np.random.RandomState(0)
    y, p = rng.randn(50), rng.randn(50)
    p += y
    metric = StreamingPearsonCorrelation()
    for i in range(0, 50, 16):  # batches of unequal size
        metric.update_state(y[i:i + 16], p[i:i + 16, None])
    assert float(metric.result()) == pytest.approx(np.corrcoef(y, p)[0, 1], abs=1e-5)
    metric.reset_state()
    assert float(metric.result()) == 0.0


def train(gen, num_classes, n, epochs, lr=3e-3, batch_size=16):
    # The bounds below hold on the measured model seeds, not on every seed
    # (KERASBERT_TEST_SEED=95 left token presence at chance): the model seed
    # is pinned to a measured one, so the suite's seed cannot decide them.
    keras.utils.set_random_seed(1234)
    x, y = gen(np.random.RandomState(0), n)
    x_val, y_val = gen(np.random.RandomState(1), 256)
    model = TextClassifier(tiny_backbone(), num_classes=num_classes)
    model.compile(learning_rate=lr, num_train_steps=epochs * (n // batch_size))
    model.fit(x, y, batch_size=batch_size, epochs=epochs, verbose=0)
    return np.asarray(model(x_val)), y_val


# Measured spreads (model seeds 1234-1253, 4 epochs): at learning rate 3e-3
# one seed in six never left chance (accuracy 0.500) for either
# classification task; at 1e-3 all 20 seeds reach accuracy 1.000 on both.
# The regression keeps 3e-3: Pearson 0.993-0.998 over 20 seeds (0.957-0.992
# at 1e-3).


def test_learns_token_presence():
    """Single text: label = whether token 3 occurs. Bound: accuracy >= 0.95."""
    logits, y = train(token_presence, 2, n=512, epochs=4, lr=1e-3)
    accuracy = (logits.argmax(-1) == y).mean()
    print(f"token presence accuracy {accuracy:.3f}")
    assert accuracy >= 0.95


def test_learns_a_pair_task():
    """Pairs: label = whether token 3 occurs in segment b (it also occurs in
    segment a half the time; segment lengths vary). Bound: accuracy >= 0.9."""
    logits, y = train(marker_in_segment_b, 2, n=512, epochs=4, lr=1e-3)
    accuracy = (logits.argmax(-1) == y).mean()
    print(f"pair accuracy {accuracy:.3f}")
    assert accuracy >= 0.9


def test_learns_a_regression():
    """Regression: target = fraction of token 3. Bound: Pearson >= 0.9."""
    predictions, y = train(token_fraction, 1, n=512, epochs=3)
    pearson = np.corrcoef(predictions[:, 0], y)[0, 1]
    print(f"regression pearson {pearson:.3f}")
    assert pearson >= 0.9
