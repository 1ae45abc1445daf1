"""MultipleChoice: [B, C, T] inputs scored per choice, round trips, half
precision, and learning to pick the choice that repeats a context token."""

import os
import sys

import keras
import numpy as np
import pytest

from kerasbert.tasks import MultipleChoice
from kerasbert.testing import TestCase

sys.path.insert(0, os.path.dirname(__file__))
from task_fixtures import choose_overlap  # noqa: E402
from task_fixtures import micro_backbone  # noqa: E402
from task_fixtures import tiny_backbone  # noqa: E402
from slow_marks import slow_covered_by  # noqa: E402

B, C = 3, 4


def batch():
    return choose_overlap(np.random.RandomState(0), B, num_choices=C)


class TestMultipleChoice(TestCase):
    def test_each_choice_is_scored_alone(self):
        model = MultipleChoice(micro_backbone(), num_choices=C)
        x, _ = batch()
        logits = model(x)
        assert tuple(logits.shape) == (B, C) and logits.dtype == "float32"
        # Row (b, c) of the flattened batch is choice c of example b.
        for c in range(C):
            one = {k: v[:, c] for k, v in x.items()}
            pooled = model.backbone(one)["pooled_output"]
            expected = np.asarray(model.output_dense(pooled))[:, 0]
            np.testing.assert_allclose(np.asarray(logits)[:, c], expected, atol=1e-5)
        with pytest.raises(ValueError, match="num_choices"):
            model({k: v[:, 0] for k, v in x.items()})
        with pytest.raises(ValueError, match="3 choices"):
            model({k: v[:, :3] for k, v in x.items()})
        with pytest.raises(ValueError, match="num_choices must be >= 2"):
            MultipleChoice(micro_backbone(), num_choices=1)

    def test_task_basics(self):
        x, y = batch()
        model = MultipleChoice(micro_backbone(), num_choices=C)
        restored = self.run_task_test(model, x, y)
        assert restored.num_choices == C
        assert {"loss", "accuracy"} <= set(restored.get_metrics_result())


# 23 s: 16 epochs of 1024 examples to accuracy >= 0.8; the default suite fits,
# evaluates and round-trips the task and scores each choice alone.
@slow_covered_by("tests/tasks/test_multiple_choice.py::TestMultipleChoice::test_task_basics",
                 "tests/tasks/test_multiple_choice.py::TestMultipleChoice::test_each_choice_is_scored_alone")
def test_learns_to_pick_the_overlapping_choice():
    """[CLS] context [SEP] choice [SEP] x 4: the right choice repeats the
    context token, the others do not (6 token ids). Bound: accuracy >= 0.8
    (chance: 0.25).

    Measured over model seeds 1234-1265: 16 epochs at learning rate 1e-3
    reach 1.000 on 27 of 32 seeds and 0.906-0.953 on the others (a pair of
    tokens left unresolved). The former 8 epochs at 3e-3 (the loss can
    blow up after reaching ~0.15) gave 0.625-1.000, under 0.9 on 4 of 22."""
    # The bound holds on the measured seeds, not on every seed (KERASBERT_TEST_SEED=94
    # gave 0.785): the model seed is pinned to one of them, so the suite's
    # seed cannot turn this check into a coin toss.
    keras.utils.set_random_seed(1234)
    n, batch_size, epochs = 1024, 16, 16
    x, y = choose_overlap(np.random.RandomState(0), n)
    x_val, y_val = choose_overlap(np.random.RandomState(1), 256)
    model = MultipleChoice(tiny_backbone(), num_choices=4)
    model.compile(learning_rate=1e-3, num_train_steps=epochs * n // batch_size)
    model.fit(x, y, batch_size=batch_size, epochs=epochs, verbose=0)
    accuracy = (np.asarray(model(x_val)).argmax(-1) == y_val).mean()
    print(f"multiple choice accuracy {accuracy:.3f}")
    assert accuracy >= 0.8
