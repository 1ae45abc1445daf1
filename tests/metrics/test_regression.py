"""Pearson / Spearman: hand-worked values, nan on constant input, scipy agreement."""

import math

import numpy as np
import pytest
import scipy.stats

from kerasbert.metrics import correlations, pearson, spearman


def test_hand_worked():
    # x = 1 2 3 4, y = 1 3 2 4; both means 2.5
    # dx = -1.5 -0.5 0.5 1.5, dy = -1.5 0.5 -0.5 1.5
    # sum dx*dy = 2.25 - 0.25 - 0.25 + 2.25 = 4; sum dx^2 = sum dy^2 = 5 -> r = 0.8
    # The values are their own ranks, so Spearman is 0.8 too.
    result = correlations([1, 2, 3, 4], [1, 3, 2, 4])
    assert result["pearson"] == pytest.approx(0.8)
    assert result["spearman"] == pytest.approx(0.8)
    assert result["pearson_spearman_avg"] == pytest.approx(0.8)


def test_spearman_uses_average_ranks_for_ties():
    # y = 1 1 2 2 -> ranks 1.5 1.5 3.5 3.5, dy = -1 -1 1 1 (sum dy^2 = 4)
    # sum dx*dy = 1.5 + 0.5 + 0.5 + 1.5 = 4 -> rho = 4 / sqrt(5 * 4)
    assert spearman([1, 2, 3, 4], [1, 1, 2, 2]) == pytest.approx(4 / math.sqrt(20))


def test_monotonic_but_not_linear():
    assert spearman([1, 2, 3], [1, 10, 100]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [1, 10, 100]) < 0.99


def test_constant_input_is_nan_without_warning(recwarn):
    result = correlations([1.0, 2.0, 3.0], [0.5, 0.5, 0.5])
    assert all(math.isnan(v) for v in result.values())
    assert math.isnan(pearson([2, 2], [1, 3]))
    assert not [w for w in recwarn if "onstant" in str(w.message)]


@pytest.mark.parametrize(
    "labels, predictions, message",
    [
        ([], [], "labels is empty"),
        ([1.0], [1.0], "at least 2 examples"),
        ([1.0, 2.0], [1.0], "differ in length"),
        ([1.0, float("nan")], [1.0, 2.0], "non-finite value nan at index 1"),
        ([1.0, 2.0], [1.0, float("inf")], "predictions holds a non-finite"),
        ([[1.0, 2.0], [3.0, 4.0]], [1.0, 2.0], "must be 1-D"),
    ],
)
def test_bad_input(labels, predictions, message):
    with pytest.raises(ValueError, match=message):
        correlations(labels, predictions)


def test_agrees_with_scipy_on_random_data():
    rng = np.random.default_rng(0)
    labels = rng.uniform(0, 5, 300)
    preds = labels + rng.normal(0, 1.5, 300)
    preds[:20] = np.round(preds[:20])  # some ties
    assert pearson(labels, preds) == pytest.approx(scipy.stats.pearsonr(labels, preds)[0])
    assert spearman(labels, preds) == pytest.approx(scipy.stats.spearmanr(labels, preds)[0])
    # [N, 1] regression outputs are accepted as [N].
    assert pearson(labels, preds[:, None]) == pytest.approx(np.corrcoef(labels, preds)[0, 1])
