"""WarmupDecaySchedule: BERT's warm-up then polynomial decay."""

import keras
import numpy as np
import pytest

from kerasbert.optimizers import WarmupDecaySchedule


def _values(schedule, steps):
    return [float(schedule(step)) for step in steps]


def test_linear_warmup_then_linear_decay_over_the_whole_run():
    schedule = WarmupDecaySchedule(
        peak_learning_rate=1.0,
        warmup_steps=10,
        decay_steps=100,
        end_learning_rate=0.1,
    )
    # step 0: start of warm-up; 5: half-way; 10: decay evaluated at the
    # global step (BERT's convention): 0.9 * (1 - 10/100) + 0.1; 55: half of
    # the run; 100: the end; beyond: constant.
    expected = [0.0, 0.5, 0.91, 0.505, 0.1, 0.1]
    got = _values(schedule, [0, 5, 10, 55, 100, 150])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


def test_power_two_decays_faster():
    schedule = WarmupDecaySchedule(1.0, 10, 100, end_learning_rate=0.1, power=2)
    got = _values(schedule, [5, 10, 55, 100])
    expected = [0.5, 0.9 * 0.9**2 + 0.1, 0.9 * 0.45**2 + 0.1, 0.1]
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_no_warmup_starts_at_peak():
    schedule = WarmupDecaySchedule(2e-5, warmup_steps=0, decay_steps=4)
    got = _values(schedule, [0, 1, 2, 4, 8])
    np.testing.assert_allclose(got, [2e-5, 1.5e-5, 1e-5, 0.0, 0.0], atol=1e-12)


def test_accepts_integer_tensor_steps():
    schedule = WarmupDecaySchedule(1.0, 4, 8)
    got = schedule(keras.ops.convert_to_tensor(2, dtype="int64"))
    assert float(got) == pytest.approx(0.5)


def test_serialization_round_trip():
    schedule = WarmupDecaySchedule(
        3e-4, 7, 70, end_learning_rate=1e-6, power=2.0, name="bert_lr"
    )
    config = keras.optimizers.schedules.serialize(schedule)
    assert config["registered_name"] == "kerasbert>WarmupDecaySchedule"
    restored = keras.optimizers.schedules.deserialize(config)
    assert isinstance(restored, WarmupDecaySchedule)
    assert restored.get_config() == schedule.get_config()
    steps = [0, 3, 7, 30, 70, 99]
    assert _values(restored, steps) == _values(schedule, steps)
    again = WarmupDecaySchedule.from_config(schedule.get_config())
    assert again.get_config() == schedule.get_config()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"warmup_steps": 0, "decay_steps": 0}, "decay_steps"),
        ({"warmup_steps": -1, "decay_steps": 10}, "warmup_steps"),
        ({"warmup_steps": 11, "decay_steps": 10}, "exceeds"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WarmupDecaySchedule(1.0, **kwargs)
