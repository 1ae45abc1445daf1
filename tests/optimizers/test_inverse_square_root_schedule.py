import keras
import numpy as np
import pytest

from kerasbert.optimizers import InverseSquareRootSchedule
from kerasbert.optimizers.recipes import TRANSFORMER_TRAINING


def _paper(step_num, d_model=512, warmup=4000):
    return d_model ** -0.5 * min(step_num ** -0.5, step_num * warmup ** -1.5)


def test_matches_the_papers_formula_with_one_based_steps():
    schedule = InverseSquareRootSchedule(512, warmup_steps=4000)
    for iterations in (0, 1, 999, 3998, 3999, 4000, 10_000, 99_999):
        # Keras passes the updates already applied: the first update is n = 1.
        assert float(schedule(iterations)) == pytest.approx(_paper(iterations + 1), rel=1e-5)
    # The peak is at the end of the warm-up: 512^-0.5 * 4000^-0.5.
    peak = float(schedule(3999))
    assert peak == pytest.approx(6.9877e-4, rel=1e-4)
    rates = np.array([float(schedule(i)) for i in range(0, 8000, 50)])
    assert (rates <= peak).all() and np.all(np.diff(rates[:80]) > 0)
    assert np.all(np.diff(rates[81:]) < 0)


def test_scale_config_and_errors():
    schedule = InverseSquareRootSchedule(1024, warmup_steps=100, scale=2.0, name="x")
    assert float(schedule(99)) == pytest.approx(2.0 * _paper(100, 1024, 100), rel=1e-5)
    revived = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert revived.get_config() == schedule.get_config()
    with pytest.raises(ValueError, match="warmup_steps"):
        InverseSquareRootSchedule(512, warmup_steps=0)
    with pytest.raises(ValueError, match="hidden_dim"):
        InverseSquareRootSchedule(0)


def test_the_recipe_row_is_the_papers_adam():
    assert TRANSFORMER_TRAINING["beta_2"] == 0.98 and TRANSFORMER_TRAINING["epsilon"] == 1e-9
    assert TRANSFORMER_TRAINING["warmup_steps"] == 4000
    assert TRANSFORMER_TRAINING["label_smoothing"] == 0.1
