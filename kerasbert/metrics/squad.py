"""SQuAD v1.1 / v2.0 evaluation: exact match and token F1 (pure Python).

Written from the published definitions of the official evaluation scripts
(Rajpurkar et al. 2016, 2018):

- Answer normalisation: lower-case; drop every ASCII punctuation character
  (`string.punctuation`); replace the whole words "a", "an", "the" with a
  space; collapse runs of whitespace to single spaces and strip the ends.
- Exact match (EM): 1 if the normalised prediction equals a normalised gold
  answer, else 0. Token F1: over whitespace tokens of the normalised strings,
  overlap counted as a multiset; precision = overlap / predicted tokens,
  recall = overlap / gold tokens. Both take the maximum over gold answers.
- v2.0: a question with no gold answer is unanswerable (the NoAns group);
  gold answers that normalise to "" are dropped before scoring and, if none is
  left, the gold becomes [""], so a prediction scores 1 only when it
  normalises to "" too. F1 with an empty side is 1 if both sides are empty,
  else 0. (As upstream, HasAns/NoAns grouping looks at the raw answer list.)
  v1.1 keeps its own rule: F1 is 0 whenever there is no overlap, even "" vs "".
- Optional no-answer probabilities (or null-score differences): a question
  whose value is above `no_answer_threshold` is predicted as no-answer.

All scores are fractions in [0, 1]; the official scripts print them x100.

Inputs:
- `gold`: {question_id: [answer text, ...]}; an empty list means
  unanswerable (v2). `gold_from_squad_json` builds it from the official JSON.
- `predictions`: {question_id: answer text} ("" = no answer).
A question in `gold` with no prediction raises ValueError (naming up to five
ids) unless `allow_missing=True`, when it scores 0 (as v1.1 does).
Predictions for ids not in `gold` are ignored.
"""

import collections
import math
import re
import string

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text):
    """Lower-case, strip punctuation and articles, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _exact(prediction, gold):
    return float(normalize_answer(prediction) == normalize_answer(gold))


def _f1(prediction, gold, empty_matches_empty):
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if empty_matches_empty and (not pred_tokens or not gold_tokens):
        return float(pred_tokens == gold_tokens)
    overlap = sum((collections.Counter(pred_tokens)
                   & collections.Counter(gold_tokens)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def _check_golds(gold_answers):
    if isinstance(gold_answers, str):
        return [gold_answers]
    gold_answers = list(gold_answers)
    if not gold_answers:
        raise ValueError("gold_answers is empty: give at least one answer text")
    return gold_answers


def exact_match(prediction, gold_answers):
    """Max over gold answers of normalised string equality (0.0 or 1.0)."""
    return max(_exact(prediction, g) for g in _check_golds(gold_answers))


def token_f1(prediction, gold_answers):
    """Max over gold answers of token F1 (v2.0 rule for empty strings)."""
    return max(_f1(prediction, g, True) for g in _check_golds(gold_answers))


def gold_from_squad_json(dataset):
    """{question_id: [answer texts]} from official SQuAD JSON.

    `dataset` is the parsed file (a dict with "data") or its "data" list.
    Unanswerable v2 questions get an empty list.
    """
    articles = dataset["data"] if isinstance(dataset, dict) else dataset
    gold = {}
    for article in articles:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                gold[qa["id"]] = [a["text"] for a in qa.get("answers", [])]
    return gold


def _check_inputs(gold, predictions, allow_missing):
    if not gold:
        raise ValueError("gold is empty: no question to evaluate")
    missing = [qid for qid in gold if qid not in predictions]
    if missing and not allow_missing:
        shown = ", ".join(repr(q) for q in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        raise ValueError(
            f"{len(missing)} of {len(gold)} questions have no prediction: "
            f"{shown}{more} (allow_missing=True scores them 0)"
        )
    for qid, text in predictions.items():
        if qid in gold and not isinstance(text, str):
            raise ValueError(f"prediction for {qid!r} is {text!r}, not a string")


def squad_v1_metrics(gold, predictions, allow_missing=False):
    """SQuAD v1.1: {"exact_match", "f1", "total"} averaged over `gold`."""
    _check_inputs(gold, predictions, allow_missing)
    exact_total = f1_total = 0.0
    for qid, answers in gold.items():
        if isinstance(answers, str):
            answers = [answers]
        if not answers:
            raise ValueError(
                f"question {qid!r} has no gold answer; SQuAD v1.1 questions are "
                "all answerable (use squad_v2_metrics for unanswerable ones)"
            )
        if qid not in predictions:
            continue
        prediction = predictions[qid]
        exact_total += max(_exact(prediction, a) for a in answers)
        f1_total += max(_f1(prediction, a, False) for a in answers)
    n = len(gold)
    return {"exact_match": exact_total / n, "f1": f1_total / n, "total": n}


def _v2_golds(answers):
    kept = [a for a in answers if normalize_answer(a)]
    return kept or [""]


def _v2_raw_scores(gold, predictions):
    """Per question: (has_answer, exact, f1, predicted_text) before any threshold."""
    rows = {}
    for qid, answers in gold.items():
        if isinstance(answers, str):
            answers = [answers]
        has_answer = bool(answers)
        golds = _v2_golds(answers)
        prediction = predictions.get(qid)
        if prediction is None:
            rows[qid] = (has_answer, 0.0, 0.0, None)
            continue
        rows[qid] = (
            has_answer,
            max(_exact(prediction, g) for g in golds),
            max(_f1(prediction, g, True) for g in golds),
            prediction,
        )
    return rows


def squad_v2_metrics(gold, predictions, no_answer_probs=None,
                     no_answer_threshold=1.0, allow_missing=False):
    """SQuAD v2.0 scores with the HasAns / NoAns breakdown.

    no_answer_probs: optional {question_id: value}; where value >
    `no_answer_threshold` the prediction is replaced by no-answer. When given,
    the result also holds `best_null_threshold`'s four keys.

    Returns {"exact", "f1", "total", "HasAns_exact", "HasAns_f1",
    "HasAns_total", "NoAns_exact", "NoAns_f1", "NoAns_total"}; a HasAns_* or
    NoAns_* group is left out when it has no question (as the official script
    does).
    """
    _check_inputs(gold, predictions, allow_missing)
    if no_answer_probs is not None:
        _check_probs(gold, predictions, no_answer_probs)
    rows = _v2_raw_scores(gold, predictions)
    exact, f1 = {}, {}
    for qid, (has_answer, em, f, prediction) in rows.items():
        if (prediction is not None and no_answer_probs is not None
                and _prob(no_answer_probs, qid) > no_answer_threshold):
            em = f = 0.0 if has_answer else 1.0
        exact[qid], f1[qid] = em, f
    result = _summary(exact, f1, list(gold))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        ids = [qid for qid, row in rows.items() if row[0] == wanted]
        if ids:
            for key, value in _summary(exact, f1, ids).items():
                result[f"{prefix}_{key}"] = value
    if no_answer_probs is not None:
        result.update(best_null_threshold(gold, predictions, no_answer_probs,
                                          allow_missing=allow_missing))
    return result


def _summary(exact, f1, ids):
    n = len(ids)
    return {
        "exact": sum(exact[q] for q in ids) / n,
        "f1": sum(f1[q] for q in ids) / n,
        "total": n,
    }


def _check_probs(gold, predictions, no_answer_probs):
    missing = [q for q in gold if q in predictions and q not in no_answer_probs]
    if missing:
        shown = ", ".join(repr(q) for q in missing[:5])
        raise ValueError(
            f"no_answer_probs lacks {len(missing)} predicted questions: {shown}"
        )


def _prob(no_answer_probs, qid):
    value = no_answer_probs[qid]
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"no_answer_probs[{qid!r}] = {value!r} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"no_answer_probs[{qid!r}] = {value!r} is not finite")
    return number


def best_null_threshold(gold, predictions, no_answer_probs, allow_missing=False):
    """The no-answer threshold that maximises EM, and the one that maximises F1.

    A threshold t means: answer with the prediction when no_answer_probs[q] <= t,
    else predict no-answer. All candidate cut points are tried — below every
    value (abstain everywhere) and at each distinct value (questions with equal
    values switch together). Ties keep the lowest threshold. The "abstain
    everywhere" cut is reported as the largest float below the smallest value,
    so the threshold is always finite and usable as is.

    Returns {"best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"}
    with scores as fractions over all questions in `gold`.
    """
    _check_inputs(gold, predictions, allow_missing)
    _check_probs(gold, predictions, no_answer_probs)
    rows = _v2_raw_scores(gold, predictions)
    answered = [q for q in gold if rows[q][3] is not None]
    probs = {q: _prob(no_answer_probs, q) for q in answered}
    n = len(gold)
    result = {}
    for name, index in (("exact", 1), ("f1", 2)):
        # Abstain everywhere: every unanswerable question is right.
        score = float(sum(1 for q in answered if not rows[q][0]))
        order = sorted(answered, key=lambda q: probs[q])
        if order:
            best_thresh = math.nextafter(probs[order[0]], -math.inf)
        else:
            best_thresh = 0.0
        best_score = score
        i = 0
        while i < len(order):
            value = probs[order[i]]
            while i < len(order) and probs[order[i]] == value:
                # Switch this question from no-answer to its prediction: gain
                # its raw score, lose the 1 it had as a right no-answer (0 for
                # an answerable question).
                has_answer, raw = rows[order[i]][0], rows[order[i]][index]
                score += raw - (0.0 if has_answer else 1.0)
                i += 1
            if score > best_score:
                best_score, best_thresh = score, value
        result[f"best_{name}"] = best_score / n
        result[f"best_{name}_thresh"] = best_thresh
    return result
