"""Parity with tf-models-official's copies of the official SQuAD evaluation scripts."""

import numpy as np
import pytest

from kerasbert.metrics import (
    best_null_threshold,
    normalize_answer,
    squad_v1_metrics,
    squad_v2_metrics,
)

v1_official = pytest.importorskip("official.nlp.tools.squad_evaluate_v1_1")
v2_official = pytest.importorskip("official.nlp.tools.squad_evaluate_v2_0")

WORDS = ["The", "red", "cat", "sat,", "on", "a", "mat.", "Big", "dog!", "an", "Ünter"]


def _random_squad(seed, unanswerable):
    rng = np.random.default_rng(seed)
    qas, predictions, probs = [], {}, {}
    for i in range(80):
        qid = f"q{i}"
        answers = []
        if rng.random() >= unanswerable:
            for _ in range(rng.integers(1, 4)):
                answers.append(" ".join(rng.choice(WORDS, rng.integers(1, 5))))
        qas.append({"id": qid, "answers": [{"text": a} for a in answers]})
        prediction = "" if rng.random() < 0.15 else " ".join(
            rng.choice(WORDS, rng.integers(1, 5)))
        # A non-empty prediction that normalises to "" (e.g. "a The") becomes
        # "": for it the official threshold search charges -1 on unanswerable
        # questions although its own scoring counts it a right no-answer
        # (test_squad.py checks our search against our own scoring instead).
        predictions[qid] = prediction if normalize_answer(prediction) else ""
        probs[qid] = float(rng.random())  # distinct values, no ties
    dataset = [{"paragraphs": [{"qas": qas}]}]
    gold = {qa["id"]: [a["text"] for a in qa["answers"]] for qa in qas}
    return dataset, gold, predictions, probs


def test_v1_matches_official():
    dataset, gold, predictions, _ = _random_squad(0, unanswerable=0.0)
    ours = squad_v1_metrics(gold, predictions)
    theirs = v1_official.evaluate(dataset, predictions)  # fractions in this copy
    assert ours["exact_match"] == pytest.approx(theirs["exact_match"])
    assert ours["f1"] == pytest.approx(theirs["final_f1"])
    assert 0.0 < ours["f1"] < 1.0


@pytest.mark.parametrize("seed", [1, 2])
def test_v2_matches_official(seed):
    dataset, gold, predictions, probs = _random_squad(seed, unanswerable=0.35)
    ours = squad_v2_metrics(gold, predictions)
    theirs = v2_official.evaluate(dataset, predictions)  # x100
    for key in ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1"):
        assert ours[key] * 100 == pytest.approx(theirs[key]), key
    for key in ("total", "HasAns_total", "NoAns_total"):
        assert ours[key] == theirs[key]

    with_probs = v2_official.evaluate(dataset, predictions, probs)
    best = best_null_threshold(gold, predictions, probs)
    assert best["best_exact"] * 100 == pytest.approx(with_probs["final_exact"])
    assert best["best_f1"] * 100 == pytest.approx(with_probs["final_f1"])
    # Thresholds agree whenever answering somewhere beats abstaining everywhere
    # (the official script reports 0.0 for "abstain everywhere").
    for ours_key, theirs_key in (("best_exact_thresh", "final_exact_thresh"),
                                 ("best_f1_thresh", "final_f1_thresh")):
        if with_probs[theirs_key] != 0.0:
            assert best[ours_key] == with_probs[theirs_key]
