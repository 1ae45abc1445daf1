"""Classification metrics: hand-worked tables plus agreement with scikit-learn."""

import numpy as np
import pytest
import sklearn.metrics as skm

from kerasbert.metrics import accuracy, confusion_matrix, f1, matthews_corrcoef

# Binary table worked by hand:
#   labels      1 1 1 0 0 0 0 1
#   predictions 1 1 0 0 0 1 0 1
#   TP = 3 (idx 0, 1, 7), FN = 1 (idx 2), FP = 1 (idx 5), TN = 3 (idx 3, 4, 6)
LABELS = [1, 1, 1, 0, 0, 0, 0, 1]
PREDS = [1, 1, 0, 0, 0, 1, 0, 1]


def test_binary_hand_worked():
    # accuracy = (TP + TN) / 8 = 6 / 8
    assert accuracy(LABELS, PREDS) == 0.75
    # precision = 3/4, recall = 3/4 -> F1 = 3/4
    assert f1(LABELS, PREDS) == pytest.approx(0.75)
    # MCC = (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN))
    #     = (9 - 1) / sqrt(4 * 4 * 4 * 4) = 8 / 16
    assert matthews_corrcoef(LABELS, PREDS) == pytest.approx(0.5)
    # rows = gold, columns = prediction: [[TN, FP], [FN, TP]]
    np.testing.assert_array_equal(confusion_matrix(LABELS, PREDS, 2), [[3, 1], [1, 3]])


def test_multiclass_hand_worked():
    labels = [0, 0, 1, 1, 2, 2]
    preds = [0, 1, 1, 1, 2, 0]
    # class 0: TP 1, FP 1, FN 1 -> F1 1/2
    # class 1: TP 2, FP 1, FN 0 -> P 2/3, R 1 -> F1 4/5
    # class 2: TP 1, FP 0, FN 1 -> P 1, R 1/2 -> F1 2/3
    # macro = (1/2 + 4/5 + 2/3) / 3 = 59/90; micro = accuracy = 4/6
    assert f1(labels, preds, average="macro") == pytest.approx(59 / 90)
    assert f1(labels, preds, average="micro") == pytest.approx(4 / 6)
    np.testing.assert_array_equal(
        confusion_matrix(labels, preds, 4),
        [[1, 1, 0, 0], [0, 2, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0]],
    )


def test_mcc_edge_values():
    # Constant predictions: denominator 0 -> 0.0 (scikit-learn's definition).
    assert matthews_corrcoef([0, 1, 0, 1], [1, 1, 1, 1]) == 0.0
    assert matthews_corrcoef([1, 1, 1], [1, 1, 1]) == 0.0
    assert matthews_corrcoef([0, 1, 0, 1], [0, 1, 0, 1]) == pytest.approx(1.0)
    assert matthews_corrcoef([0, 1, 0, 1], [1, 0, 1, 0]) == pytest.approx(-1.0)


def test_f1_without_positives_is_zero():
    assert f1([0, 0, 0], [0, 0, 0]) == 0.0
    # Only positives present is a valid binary case too.
    assert f1([1, 1], [1, 0]) == pytest.approx(2 / 3)


def test_accepts_bools_and_integral_floats_and_columns():
    assert accuracy(np.array([True, False]), [1.0, 1.0]) == 0.5
    assert accuracy(np.array([[1], [0]]), [1, 0]) == 1.0


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: accuracy([], []), "labels is empty"),
        (lambda: accuracy([1, 0], [1]), "differ in length: 2 labels, 1 predictions"),
        (lambda: accuracy([0, 1], [0.2, 0.8]), "integer class ids, found 0.2"),
        (lambda: accuracy([0, 1], [[0.1, 0.9], [0.8, 0.2]]), "argmax"),
        (lambda: f1([0, 1, 2], [0, 1, 2]), "use average='macro'"),
        (lambda: f1([0, 1], [0, 1], average="weighted"), "average must be one of"),
        (lambda: confusion_matrix([0, 3], [0, 1], 3), r"labels\[1\] = 3 is outside"),
        (lambda: confusion_matrix([0, 1], [-1, 1], 3), r"predictions\[0\] = -1"),
        (lambda: confusion_matrix([0], [0], 0), "num_classes must be >= 1"),
        (lambda: accuracy(["a"], ["a"]), "dtype"),
    ],
)
def test_bad_input_names_the_problem(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_agrees_with_sklearn_on_random_data():
    rng = np.random.default_rng(0)
    for num_classes in (2, 3, 5):
        labels = rng.integers(0, num_classes, 200)
        preds = np.where(rng.random(200) < 0.6, labels, rng.integers(0, num_classes, 200))
        assert accuracy(labels, preds) == pytest.approx(skm.accuracy_score(labels, preds))
        assert matthews_corrcoef(labels, preds) == pytest.approx(
            skm.matthews_corrcoef(labels, preds))
        for average in ("macro", "micro"):
            assert f1(labels, preds, average=average) == pytest.approx(
                skm.f1_score(labels, preds, average=average))
        np.testing.assert_array_equal(
            confusion_matrix(labels, preds, num_classes),
            skm.confusion_matrix(labels, preds, labels=list(range(num_classes))))
        if num_classes == 2:
            assert f1(labels, preds) == pytest.approx(skm.f1_score(labels, preds))
