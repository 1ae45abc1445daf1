"""Comparing decisions (argmax labels, chosen answers, thresholded flags)
between two computations of the same model without flaky tests.

Two correct implementations of one model (Keras on the Python pipeline and
an exported SavedModel, a graph and an XLA step, two thread schedules)
agree on scores only up to a float tolerance. Where the best two candidates
are closer than that, either may win in either implementation, so an exact
comparison of the decision fails at random. These helpers compare scores
within the tolerance everywhere and decisions only where the expected
margin between the best and the runner-up is `margin_factor` times the
tolerance; elsewhere the decision must still be one of the near-best
candidates. They also assert that enough rows had a clear winner, so a test
cannot silently stop checking decisions.
"""

import numpy as np

MARGIN_FACTOR = 10.0


def top2_margin(scores):
    """best - second best along the last axis (inf with one candidate)."""
    scores = np.asarray(scores, np.float64)
    if scores.shape[-1] < 2:
        return np.full(scores.shape[:-1], np.inf)
    top = np.sort(scores, axis=-1)
    return top[..., -1] - top[..., -2]


def decided(scores, tolerance, margin_factor=MARGIN_FACTOR):
    """Bool mask of the rows whose best candidate wins by more than
    `margin_factor * tolerance`."""
    return top2_margin(scores) > margin_factor * tolerance


def _count(min_decided, rows):
    if min_decided is None:
        return (rows + 1) // 2  # at least half
    if isinstance(min_decided, float):
        return int(np.ceil(min_decided * rows))
    return int(min_decided)


def assert_same_decisions(expected, actual, decisions=None, *, atol=1e-5,
                          margin_factor=MARGIN_FACTOR, min_decided=None, labels=None,
                          decoded=None, err_msg=""):
    """Scores close everywhere, decisions equal where the margin is clear.

    Args:
        expected: float [..., K], the reference scores (probabilities or
            logits) of each row's K candidates.
        actual: float [..., K], the scores under test (`atol` apart at most).
        decisions: int [...], the decisions under test (for example a served
            `label_id`); None takes the argmax of `actual`.
        atol: the absolute tolerance on the scores.
        margin_factor: a row has a clear winner when its expected top-2
            margin exceeds `margin_factor * atol`.
        min_decided: how many rows must have a clear winner: an int, a
            float fraction of the rows, or None for at least half.
        labels: optional names of the candidates, one sequence for all rows
            or one sequence per row (multiple choice), with `decoded`: the
            decoded names under test, which must be the names of `decisions`.
        err_msg: added to failure messages.

    Returns:
        the bool mask [...] of rows with a clear winner.
    """
    expected = np.asarray(expected, np.float64)
    actual = np.asarray(actual, np.float64)
    assert expected.shape == actual.shape, (expected.shape, actual.shape, err_msg)
    np.testing.assert_allclose(actual, expected, atol=atol, rtol=0, err_msg=err_msg)
    rows_shape = expected.shape[:-1]
    flat = expected.reshape(-1, expected.shape[-1])
    if decisions is None:
        decisions = actual.argmax(-1)
    decisions = np.asarray(decisions).reshape(-1)
    assert decisions.shape[0] == flat.shape[0], (decisions.shape, rows_shape, err_msg)
    margin = margin_factor * atol
    clear = decided(flat, atol, margin_factor)
    best = flat.argmax(-1)
    for row, (choice, winner) in enumerate(zip(decisions, best)):
        if clear[row]:
            assert choice == winner, (
                f"row {row}: decision {choice}, expected {winner} (scores {flat[row]}, "
                f"margin {top2_margin(flat[row]):.3g} > {margin:.3g}) {err_msg}")
        else:  # a near tie: any candidate within the margin of the best may win
            assert flat[row, choice] >= flat[row].max() - margin, (
                f"row {row}: decision {choice} is not among the near-best candidates "
                f"(scores {flat[row]}) {err_msg}")
    needed = _count(min_decided, flat.shape[0])
    assert clear.sum() >= needed, (
        f"only {clear.sum()} of {flat.shape[0]} rows have a top-2 margin over {margin:.3g} "
        f"(need {needed}): the test no longer checks decisions; make the margins larger "
        f"{err_msg}")
    if decoded is not None:
        assert labels is not None, "decoded names need the candidates' labels"
        decoded = list(np.asarray(decoded, object).reshape(-1))
        assert len(decoded) == len(decisions), (len(decoded), len(decisions), err_msg)
        shared = len(labels) > 0 and isinstance(labels[0], str)
        for row, (choice, name) in enumerate(zip(decisions, decoded)):
            names = labels if shared else labels[row]
            assert name == names[choice], (row, name, names[choice], err_msg)
    return clear.reshape(rows_shape)


def assert_same_choice(candidates, chosen, expected=None, *, tolerance, margin_factor=MARGIN_FACTOR,
                       err_msg=""):
    """One decision among scored candidates (e.g. answer spans).

    Args:
        candidates: dict {candidate: expected score}.
        chosen: the candidate the implementation under test picked.
        expected: the reference's pick (default: the best-scored candidate).
        tolerance: how far the two implementations' scores may differ.

    Returns:
        True when the best candidate wins by more than `margin_factor *
        tolerance` (then `chosen` must equal it), False for a near tie (then
        `chosen` must score within that margin of the best).
    """
    assert candidates, f"no candidates {err_msg}"
    ranked = sorted(candidates.items(), key=lambda kv: -kv[1])
    best_score = ranked[0][1]
    if expected is None:
        expected = ranked[0][0]
    assert candidates.get(expected) == best_score, (expected, ranked[:3], err_msg)
    margin = margin_factor * tolerance
    runner_up = ranked[1][1] if len(ranked) > 1 else -np.inf
    if best_score - runner_up > margin:
        assert chosen == expected, (chosen, expected, ranked[:3], err_msg)
        return True
    assert chosen in candidates and candidates[chosen] >= best_score - margin, (
        chosen, ranked[:3], err_msg)
    return False
