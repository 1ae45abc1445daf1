"""bench/dropout_bench.py: its Philox mask is a dropout (rate, scale, seeding,
gradient), and the --quick run measures both steps and gives a verdict.
Timings are never asserted, only that they are measured."""

import math

import numpy as np
import pytest
import tensorflow as tf
from bench_loader import load_bench


@pytest.fixture(scope="module")
def bench():
    return load_bench("dropout_bench")


@pytest.mark.parametrize("jit_compile", [False, True])
def test_philox_mask_is_a_dropout(bench, jit_compile):
    """Kept elements are scaled by 1 / (1 - rate), the kept fraction is
    1 - rate, the gradient is the same mask, each call draws a new mask and
    the same seed gives the same masks."""
    import keras

    x = tf.ones((64, 1024))

    def masks(seed):
        generator = keras.random.SeedGenerator(seed)

        @tf.function(jit_compile=jit_compile)
        def step():
            with tf.GradientTape() as tape:
                tape.watch(x)
                y = bench.philox_dropout(x, 0.25, generator)
            return y, tape.gradient(y, x)

        return [step() for _ in range(2)]

    (y1, g1), (y2, _) = masks(seed=3)
    y1, g1, y2 = y1.numpy(), g1.numpy(), y2.numpy()
    assert set(np.unique(y1)) == {0.0, np.float32(1 / 0.75)}
    assert abs((y1 > 0).mean() - 0.75) < 0.01  # 65536 draws: sd 0.0017
    np.testing.assert_array_equal(g1, y1)
    assert not np.array_equal(y1, y2)
    (z1, _), _ = masks(seed=3)
    np.testing.assert_array_equal(z1.numpy(), y1)


def test_quick_run_measures_both_steps(bench, capsys):
    payload = bench.main(["--quick", "--jit", "off"])
    (row,) = payload["rows"]
    assert row["philox_seq_per_s"] > 0 and row["keras_seq_per_s"] > 0
    assert len(row["paired_ratios"]) == 2 and all(math.isfinite(r) for r in row["paired_ratios"])
    assert row["gain_outside_noise"] == (min(row["paired_ratios"]) > 1.0)
    assert "| off |" in capsys.readouterr().out
