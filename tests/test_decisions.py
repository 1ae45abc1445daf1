"""kerasbert.testing's decision comparisons: near ties may go either way,
clear decisions must match, and a test cannot stop checking silently."""

import numpy as np
import pytest

from kerasbert.testing import assert_same_choice
from kerasbert.testing import assert_same_decisions
from kerasbert.testing import top2_margin

# Row 2 is the fresh-clone failure of test_export's multiple choice: two
# choices 1.6e-7 apart.
EXPECTED = np.array([[0.00097227, 0.78692064, 0.21210709],
                     [0.33348918, 0.33253842, 0.3339724],
                     [0.33341723, 0.33341707, 0.33316569],
                     [0.33481713, 0.33533105, 0.32985182]])


def test_near_ties_may_go_either_way():
    served = EXPECTED + 1e-6 * np.array([[0, 0, 0], [0, 0, 0], [-1, 1, 0], [0, 0, 0]])
    decided = assert_same_decisions(EXPECTED, served, [1, 2, 1, 1], atol=1e-5)
    np.testing.assert_array_equal(decided, [True, True, False, True])
    assert_same_decisions(EXPECTED, served, [1, 2, 0, 1], atol=1e-5)
    with pytest.raises(AssertionError, match="near-best"):
        assert_same_decisions(EXPECTED, served, [1, 2, 2, 1], atol=1e-5)


def test_clear_decisions_must_match():
    with pytest.raises(AssertionError, match="row 0: decision 2, expected 1"):
        assert_same_decisions(EXPECTED, EXPECTED, [2, 2, 0, 1], atol=1e-5)
    with pytest.raises(AssertionError):  # scores apart by more than the tolerance
        assert_same_decisions(EXPECTED, EXPECTED + 1e-4, atol=1e-5)


def test_enough_rows_must_be_decided():
    with pytest.raises(AssertionError, match="only 3 of 4 rows"):
        assert_same_decisions(EXPECTED, EXPECTED, atol=1e-5, min_decided=4)
    flat = np.full((4, 3), 1 / 3)
    with pytest.raises(AssertionError, match="no longer checks decisions"):
        assert_same_decisions(flat, flat, atol=1e-5)


def test_decoded_names_follow_the_decisions():
    labels = ["a", "b", "c"]
    assert_same_decisions(EXPECTED, EXPECTED, [1, 2, 1, 1], atol=1e-5, labels=labels,
                          decoded=["b", "c", "b", "b"])
    with pytest.raises(AssertionError):
        assert_same_decisions(EXPECTED, EXPECTED, [1, 2, 1, 1], atol=1e-5, labels=labels,
                              decoded=["b", "c", "a", "b"])
    per_row = [["x", "y", "z"]] * 4
    assert_same_decisions(EXPECTED, EXPECTED, [1, 2, 0, 1], atol=1e-5, labels=per_row,
                          decoded=["y", "z", "x", "y"])


def test_choice_among_scored_candidates():
    spans = {(0, 4): 10.1536, (20, 24): 10.1536, (5, 9): 9.82}
    assert not assert_same_choice(spans, (20, 24), (0, 4), tolerance=1e-5)  # an exact tie
    with pytest.raises(AssertionError):
        assert_same_choice(spans, (5, 9), (0, 4), tolerance=1e-5)
    assert assert_same_choice({"a": 2.0, "b": 1.0}, "a", tolerance=1e-5)
    with pytest.raises(AssertionError):
        assert_same_choice({"a": 2.0, "b": 1.0}, "b", tolerance=1e-5)
    np.testing.assert_allclose(top2_margin(EXPECTED[:2]), [0.57481355, 0.00048322], atol=1e-8)
