"""SQuAD v1.1 / v2.0 EM and F1: hand-worked examples and threshold search."""

import math

import numpy as np
import pytest

from kerasbert.metrics import (
    best_null_threshold,
    exact_match,
    gold_from_squad_json,
    normalize_answer,
    squad_v1_metrics,
    squad_v2_metrics,
    token_f1,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The  Cat!", "cat"),
        # punctuation first, then articles, then whitespace
        ("  A man, a plan; an  canal: Panama ", "man plan canal panama"),
        ("Theory of the\tthings", "theory of things"),  # only whole words
        ("the-end", "theend"),  # hyphen removed before article check
        ("Levi's Stadium", "levis stadium"),
        ("an", ""),
        ("Straße «Ünter»", "straße «ünter»"),  # only ASCII punctuation goes
    ],
)
def test_normalize_answer(text, expected):
    assert normalize_answer(text) == expected


def test_exact_match_and_f1_take_max_over_golds():
    assert exact_match("The Cat Sat!", ["a dog", "cat sat"]) == 1.0
    # pred "cat sat"; gold "cat": overlap 1, P 1/2, R 1 -> 2/3
    # gold "cat sat down": overlap 2, P 1, R 2/3 -> 2*(2/3)/(5/3) = 4/5
    golds = ["a cat", "the cat sat down"]
    assert exact_match("the cat sat", golds) == 0.0
    assert token_f1("the cat sat", golds) == pytest.approx(0.8)
    # Token overlap is a multiset: "x x y" vs "x y y" share {x, y} -> 2/3
    assert token_f1("x x y", "x y y") == pytest.approx(2 / 3)
    assert token_f1("", [""]) == 1.0 and token_f1("x", [""]) == 0.0


def test_v1_hand_worked():
    gold = {
        "q1": ["Denver Broncos"],
        "q2": ["Santa Clara, California", "Levi's Stadium"],
        "q3": ["1"],
    }
    predictions = {"q1": "the Denver Broncos", "q2": "Levi's Stadium in Santa Clara",
                   "q3": "2", "unknown": "ignored"}
    # q1: EM 1, F1 1.
    # q2: pred "levis stadium in santa clara" (5 tokens)
    #     vs "santa clara california": overlap 2, P 2/5, R 2/3 -> 1/2
    #     vs "levis stadium": overlap 2, P 2/5, R 1 -> 4/7  => max 4/7, EM 0
    # q3: 0, 0.
    result = squad_v1_metrics(gold, predictions)
    assert result["exact_match"] == pytest.approx(1 / 3)
    assert result["f1"] == pytest.approx((1 + 4 / 7) / 3)
    assert result["total"] == 3


def test_v1_empty_after_normalisation_keeps_v1_rule():
    # "the" and "a" both normalise to "": EM 1, but v1.1 F1 needs a shared token.
    result = squad_v1_metrics({"q": ["the"]}, {"q": "a"})
    assert result == {"exact_match": 1.0, "f1": 0.0, "total": 1}


def test_missing_predictions():
    gold = {"q1": ["x"], "q2": ["y"]}
    with pytest.raises(ValueError, match="1 of 2 questions have no prediction: 'q2'"):
        squad_v1_metrics(gold, {"q1": "x"})
    # allow_missing: q2 scores 0 -> (1 + 0) / 2
    assert squad_v1_metrics(gold, {"q1": "x"}, allow_missing=True)["exact_match"] == 0.5
    v2 = squad_v2_metrics({"q1": ["x"], "q2": []}, {"q1": "x"}, allow_missing=True)
    assert v2["exact"] == 0.5 and v2["NoAns_exact"] == 0.0


# Four v2 questions used below:
#   a: gold "cat",      pred "cat"   -> EM 1, F1 1
#   b: gold "big dog",  pred "dog"   -> EM 0, F1: P 1, R 1/2 -> 2/3
#   c: no answer,       pred ""      -> EM 1, F1 1
#   d: no answer,       pred "mouse" -> EM 0, F1 0
V2_GOLD = {"a": ["cat"], "b": ["big dog"], "c": [], "d": []}
V2_PRED = {"a": "cat", "b": "dog", "c": "", "d": "mouse"}
V2_PROBS = {"a": 0.1, "b": 0.6, "c": 0.9, "d": 0.8}


def test_v2_breakdown_hand_worked():
    result = squad_v2_metrics(V2_GOLD, V2_PRED)
    assert result["exact"] == pytest.approx(2 / 4)
    assert result["f1"] == pytest.approx((1 + 2 / 3 + 1 + 0) / 4)
    assert result["total"] == 4
    assert result["HasAns_exact"] == pytest.approx(1 / 2)
    assert result["HasAns_f1"] == pytest.approx((1 + 2 / 3) / 2)
    assert result["HasAns_total"] == 2
    assert result["NoAns_exact"] == result["NoAns_f1"] == pytest.approx(1 / 2)
    assert result["NoAns_total"] == 2


def test_v2_gold_that_normalises_to_empty_matches_empty_prediction():
    # Gold "The" normalises to "" -> dropped -> gold [""]; grouping looks at the
    # raw list (non-empty -> HasAns), as the official script does.
    result = squad_v2_metrics({"q": ["The", "  "]}, {"q": ""})
    assert result["HasAns_total"] == 1 and result["exact"] == 1.0
    assert "NoAns_total" not in result  # empty group left out, as upstream


def test_v2_threshold_applies_no_answer():
    # threshold 0.5: b (0.6), c (0.9), d (0.8) become no-answer.
    # a 1/1, b 0/0 (had an answer), c 1/1, d 1/1 -> EM = F1 = 3/4
    result = squad_v2_metrics(V2_GOLD, V2_PRED, V2_PROBS, no_answer_threshold=0.5)
    assert result["exact"] == pytest.approx(3 / 4)
    assert result["f1"] == pytest.approx(3 / 4)
    assert "best_f1_thresh" in result


def test_best_null_threshold_hand_worked():
    # Sorted by no-answer prob: a 0.1, b 0.6, d 0.8, c 0.9.
    # Start with every question as no-answer: c, d right -> 2.
    # EM: +a (+1) = 3 at 0.1 | +b (+0) = 3 | +d (0 - 1) = 2 | +c (1 - 1) = 2
    #     -> best 3/4 at 0.1
    # F1: +a = 3 at 0.1 | +b (+2/3) = 11/3 at 0.6 | +d = 8/3 | +c = 8/3
    #     -> best (11/3)/4 = 11/12 at 0.6
    result = best_null_threshold(V2_GOLD, V2_PRED, V2_PROBS)
    assert result["best_exact"] == pytest.approx(3 / 4)
    assert result["best_exact_thresh"] == 0.1
    assert result["best_f1"] == pytest.approx(11 / 12)
    assert result["best_f1_thresh"] == 0.6
    # The reported threshold reproduces the reported score.
    applied = squad_v2_metrics(V2_GOLD, V2_PRED, V2_PROBS, no_answer_threshold=0.6)
    assert applied["f1"] == pytest.approx(11 / 12)


def test_best_threshold_abstain_everywhere_is_finite_and_below_all():
    gold = {"p": [], "q": []}
    pred = {"p": "x", "q": "y"}
    probs = {"p": 0.0, "q": 0.3}
    result = best_null_threshold(gold, pred, probs)
    assert result["best_exact"] == 1.0
    assert math.isfinite(result["best_exact_thresh"]) and result["best_exact_thresh"] < 0.0
    applied = squad_v2_metrics(gold, pred, probs,
                               no_answer_threshold=result["best_exact_thresh"])
    assert applied["exact"] == 1.0


def test_best_threshold_moves_tied_values_together():
    # p (right answer) and q (wrong non-empty answer to an unanswerable question)
    # share 0.5: switching both gains +1 - 1 = 0, so abstaining stays best.
    gold = {"p": ["yes"], "q": []}
    pred = {"p": "yes", "q": "x"}
    result = best_null_threshold(gold, pred, {"p": 0.5, "q": 0.5})
    assert result["best_exact"] == 0.5 and result["best_exact_thresh"] < 0.5


def test_best_threshold_is_optimal_on_random_data():
    rng = np.random.default_rng(0)
    words = ["red", "cat", "sat", "big", "dog", "on"]
    gold, pred, probs = {}, {}, {}
    for i in range(40):
        qid = f"q{i}"
        gold[qid] = [] if rng.random() < 0.4 else [" ".join(rng.choice(words, 2))]
        pred[qid] = "" if rng.random() < 0.2 else " ".join(rng.choice(words, 2))
        probs[qid] = float(np.round(rng.random(), 1))  # ties on purpose
    best = best_null_threshold(gold, pred, probs)
    candidates = sorted(set(probs.values())) + [best["best_exact_thresh"]]
    scores = [squad_v2_metrics(gold, pred, probs, no_answer_threshold=t) for t in candidates]
    assert best["best_exact"] == pytest.approx(max(s["exact"] for s in scores))
    assert best["best_f1"] == pytest.approx(max(s["f1"] for s in scores))
    at_best = squad_v2_metrics(gold, pred, probs, no_answer_threshold=best["best_f1_thresh"])
    assert at_best["f1"] == pytest.approx(best["best_f1"])


def test_gold_from_squad_json():
    dataset = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{
        "context": "The cat sat.",
        "qas": [
            {"id": "1", "question": "Who?", "answers": [{"text": "The cat", "answer_start": 0}]},
            {"id": "2", "question": "Why?", "answers": [], "is_impossible": True},
        ]}]}]}
    assert gold_from_squad_json(dataset) == {"1": ["The cat"], "2": []}


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: squad_v1_metrics({}, {}), "gold is empty"),
        (lambda: squad_v1_metrics({"q": []}, {"q": "x"}), "use squad_v2_metrics"),
        (lambda: squad_v2_metrics({"q": ["a"]}, {"q": None}), "not a string"),
        (lambda: squad_v2_metrics({"q": ["a"]}, {"q": "a"}, {}), "no_answer_probs lacks"),
        (lambda: best_null_threshold({"q": ["a"]}, {"q": "a"}, {"q": float("nan")}),
         "not finite"),
        (lambda: best_null_threshold({"q": ["a"]}, {"q": "a"}, {"q": "high"}),
         "not a number"),
        (lambda: exact_match("a", []), "gold_answers is empty"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_best_threshold_scores_like_the_threshold_it_reports():
    # Unanswerable q answered "The" normalises to "" -> already a right
    # no-answer (EM 1). Answering it costs nothing, so answering p (right,
    # prob 0.5) as well gives 2/2. (The official search would charge -1 for
    # q's non-empty string and report 1/2, though applying its own threshold
    # scores 2/2.)
    gold = {"p": ["yes"], "q": []}
    pred = {"p": "yes", "q": "The"}
    probs = {"q": 0.2, "p": 0.5}
    result = best_null_threshold(gold, pred, probs)
    assert result["best_exact"] == 1.0 and result["best_exact_thresh"] == 0.5
    assert squad_v2_metrics(gold, pred, probs, no_answer_threshold=0.5)["exact"] == 1.0
