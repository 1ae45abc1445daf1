"""seqeval entity metrics: hand-worked sentences, schemes and modes, bad labels."""

import numpy as np
import pytest
import seqeval.metrics

from kerasbert.metrics import classification_report, entity_f1, tagging_metrics

# Gold: PER (0-1), LOC (3), ORG (5-6) = 3 entities.
GOLD = [["B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG", "I-ORG"]]
# PER and LOC right; ORG cut short to (5-5): a partial match counts nothing.
PRED = [["B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG", "O"]]


@pytest.mark.parametrize("mode", ["conlleval", "strict"])
def test_partial_match_scores_zero(mode):
    result = tagging_metrics(GOLD, PRED, mode=mode)
    # TP = 2 (PER, LOC), predicted = 3, gold = 3 -> P = R = F1 = 2/3
    assert result["precision"] == pytest.approx(2 / 3)
    assert result["recall"] == pytest.approx(2 / 3)
    assert result["f1"] == pytest.approx(2 / 3)
    # 6 of 7 tokens right
    assert result["accuracy"] == pytest.approx(6 / 7)
    assert result["num_entities"] == 3
    assert result["per_type"]["ORG"] == {
        "precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert result["per_type"]["PER"]["f1"] == 1.0
    assert sorted(result["per_type"]) == ["LOC", "ORG", "PER"]


def test_extra_entity_lowers_precision_only():
    gold = [["B-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "O", "B-LOC"], ["B-ORG", "B-MISC"]]
    result = tagging_metrics(gold, pred)
    # TP 3, predicted 4, gold 3 -> P 3/4, R 1, F1 = 2*(3/4)/(7/4) = 6/7
    assert result["precision"] == pytest.approx(3 / 4)
    assert result["recall"] == 1.0
    assert result["f1"] == pytest.approx(6 / 7)
    assert result["per_type"]["MISC"]["support"] == 0


def test_conlleval_is_lenient_strict_is_not():
    gold = [["B-PER", "I-PER", "O"]]
    pred = [["I-PER", "I-PER", "O"]]  # ill-formed in IOB2: no B- start
    assert entity_f1(gold, pred) == 1.0  # conlleval: I- after O starts a chunk
    assert entity_f1(gold, pred, mode="strict") == 0.0


def test_iobes_and_iob1():
    gold = [["S-PER", "O", "B-LOC", "E-LOC"]]
    assert entity_f1(gold, gold, scheme="IOBES") == 1.0
    assert entity_f1(gold, gold, scheme="IOBES", mode="strict") == 1.0
    # IOB1 (the original CoNLL-2003 files): entities start with I-; B- only
    # splits two adjacent entities of one type -> 2 PER entities here.
    iob1 = [["I-PER", "I-PER", "B-PER", "O"]]
    result = tagging_metrics(iob1, iob1, scheme="IOB1")
    assert result["num_entities"] == 2


def test_integer_ids_with_label_names():
    names = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    gold = [np.array([1, 2, 0, 5])]
    pred = [[1, 2, 0, 0]]
    result = tagging_metrics(gold, pred, label_names=names)
    assert result["recall"] == 0.5 and result["precision"] == 1.0


def test_no_entities_anywhere_is_zero_not_a_warning(recwarn):
    result = tagging_metrics([["O", "O"]], [["O", "O"]])
    assert result["f1"] == 0.0 and result["accuracy"] == 1.0
    assert result["per_type"] == {}
    assert not recwarn.list


@pytest.mark.parametrize(
    "labels, predictions, kwargs, message",
    [
        ([], [], {}, "labels is empty"),
        ([["O"]], [["O"], ["O"]], {}, "1 label sentences, 2 prediction"),
        ([["O", "O"]], [["O"]], {}, "sentence 0: 2 labels but 1 predictions"),
        ([["PER"]], [["O"]], {}, r"labels\[0\]\[0\] = 'PER' is not a IOB2 label"),
        ([["O"]], [["S-LOC"]], {}, r"predictions\[0\]\[0\] = 'S-LOC'"),
        ([["O"]], [["O"]], {"scheme": "BILOU"}, "needs mode='strict'"),
        ([["O"]], [["O"]], {"scheme": "IOB3"}, "scheme must be one of"),
        ([["O"]], [["O"]], {"mode": "loose"}, "mode must be one of"),
        ([[1]], [[0]], {}, "give label_names"),
        ([[9]], [[0]], {"label_names": ["O", "B-X"]}, "label id 9, outside"),
        (["B-PER O"], ["O"], {}, "is a string"),
        ([[]], [[]], {}, "no token at all"),
    ],
)
def test_bad_input(labels, predictions, kwargs, message):
    with pytest.raises(ValueError, match=message):
        tagging_metrics(labels, predictions, **kwargs)


def test_report_is_text_with_every_type():
    report = classification_report(GOLD, PRED)
    assert "ORG" in report and "micro avg" in report


def test_agrees_with_seqeval_on_random_tags():
    rng = np.random.default_rng(0)
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG"]
    gold = [list(rng.choice(tags, rng.integers(1, 12))) for _ in range(60)]
    pred = [[t if rng.random() < 0.8 else str(rng.choice(tags)) for t in s] for s in gold]
    gold = [[str(t) for t in s] for s in gold]
    result = tagging_metrics(gold, pred)
    assert result["f1"] == pytest.approx(seqeval.metrics.f1_score(gold, pred))
    assert result["precision"] == pytest.approx(seqeval.metrics.precision_score(gold, pred))
    assert result["recall"] == pytest.approx(seqeval.metrics.recall_score(gold, pred))
    assert result["accuracy"] == pytest.approx(seqeval.metrics.accuracy_score(gold, pred))
