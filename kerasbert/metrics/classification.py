"""Classification metrics: accuracy, F1, Matthews correlation, confusion matrix.

Inputs are 1-D integer class ids (gold `labels` and `predictions`, one per
example). Take the argmax of logits/probabilities before calling these.
Results are plain Python floats in [0, 1] (MCC in [-1, 1]).

Edge cases (decided here, tested in tests/metrics/test_classification.py):
- empty input, mismatched lengths, non-integer ids -> ValueError naming it;
- F1 when there is no positive example in labels *and* predictions (precision
  or recall is 0/0) -> 0.0 (scikit-learn's `zero_division=0.0`), no warning;
- MCC when labels or predictions are constant (a zero row/column product in
  the formula's denominator) -> 0.0, as scikit-learn defines it.

scikit-learn is imported on first call, not at module import.
"""

import warnings

import numpy as np

from kerasbert.metrics._validation import as_class_ids, check_same_length

_F1_AVERAGES = ("binary", "macro", "micro")


def _pair(labels, predictions):
    labels = as_class_ids(labels, "labels")
    predictions = as_class_ids(predictions, "predictions")
    check_same_length(labels, predictions)
    return labels, predictions


def accuracy(labels, predictions):
    """Fraction of examples whose prediction equals the label."""
    labels, predictions = _pair(labels, predictions)
    return float(np.mean(labels == predictions))


def f1(labels, predictions, average="binary", pos_label=1):
    """F1 score.

    average: "binary" (F1 of class `pos_label`; labels/predictions must only
    hold 0 and 1 — or `pos_label` and one other id), "macro" (unweighted mean
    of per-class F1 over the classes present in labels or predictions) or
    "micro" (from global TP/FP/FN counts; equals accuracy for single-label
    multi-class data).
    """
    if average not in _F1_AVERAGES:
        raise ValueError(
            f"average must be one of {', '.join(_F1_AVERAGES)}, got {average!r}"
        )
    labels, predictions = _pair(labels, predictions)
    if average == "binary":
        classes = set(np.unique(labels).tolist()) | set(np.unique(predictions).tolist())
        if len(classes - {pos_label}) > 1:
            raise ValueError(
                f"binary F1 needs two classes, found class ids {sorted(classes)}; "
                "use average='macro' or 'micro' for multi-class data"
            )
    from sklearn.metrics import f1_score

    kwargs = {"pos_label": pos_label} if average == "binary" else {}
    return float(
        f1_score(labels, predictions, average=average, zero_division=0.0, **kwargs)
    )


def matthews_corrcoef(labels, predictions):
    """Matthews correlation coefficient (the CoLA metric); multi-class aware.

    Returns 0.0 when labels or predictions are constant (undefined 0/0 case).
    """
    labels, predictions = _pair(labels, predictions)
    from sklearn.metrics import matthews_corrcoef as _mcc

    with warnings.catch_warnings():
        # "A single label was found": expected for constant inputs -> 0.0.
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        value = float(_mcc(labels, predictions))
    return 0.0 if np.isnan(value) else value


def confusion_matrix(labels, predictions, num_classes):
    """int64 array [num_classes, num_classes]: row = gold label, column = prediction.

    Every id must lie in [0, num_classes); an id outside raises ValueError
    naming the argument, the value and its index.
    """
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)):
        raise ValueError(f"num_classes must be an int, got {num_classes!r}")
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes}")
    labels, predictions = _pair(labels, predictions)
    for name, values in (("labels", labels), ("predictions", predictions)):
        bad = np.flatnonzero((values < 0) | (values >= num_classes))
        if bad.size:
            raise ValueError(
                f"{name}[{bad[0]}] = {values[bad[0]]} is outside the "
                f"{num_classes} classes [0, {num_classes - 1}]"
            )
    from sklearn.metrics import confusion_matrix as _cm

    return _cm(labels, predictions, labels=np.arange(num_classes)).astype(np.int64)
