"""Regression metrics: Pearson and Spearman correlation (STS-B).

Inputs are 1-D real numbers (gold `labels`, model `predictions`), at least two
examples, all finite. A [N, 1] column is accepted as [N].

Constant input: a correlation is undefined (0/0) when labels or predictions
are constant; the functions then return `float("nan")` — no exception and no
warning — so an evaluation during early training (a collapsed regressor) still
completes. `pearson_spearman_avg` is nan when either part is nan. Check with
`math.isnan` before comparing; `json.dump` writes it as `NaN`.

scipy is imported on first call, not at module import.
"""

import math
import warnings

import numpy as np

from kerasbert.metrics._validation import as_real, check_same_length


def _pair(labels, predictions):
    labels = as_real(labels, "labels")
    predictions = as_real(predictions, "predictions")
    check_same_length(labels, predictions)
    if labels.size < 2:
        raise ValueError(
            f"a correlation needs at least 2 examples, got {labels.size}"
        )
    return labels, predictions


def _constant(values):
    return bool(np.all(values == values[0]))


def _correlation(name, labels, predictions):
    """scipy.stats.<name>'s coefficient; nan when either input is constant."""
    labels, predictions = _pair(labels, predictions)
    if _constant(labels) or _constant(predictions):
        return float("nan")
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(getattr(stats, name)(labels, predictions)[0])


def pearson(labels, predictions):
    """Pearson's r; nan when either input is constant."""
    return _correlation("pearsonr", labels, predictions)


def spearman(labels, predictions):
    """Spearman's rho (Pearson on average ranks); nan when either input is constant."""
    return _correlation("spearmanr", labels, predictions)


def correlations(labels, predictions):
    """{"pearson", "spearman", "pearson_spearman_avg"} — what GLUE reports for STS-B."""
    p = pearson(labels, predictions)
    s = spearman(labels, predictions)
    avg = float("nan") if math.isnan(p) or math.isnan(s) else (p + s) / 2.0
    return {"pearson": p, "spearman": s, "pearson_spearman_avg": avg}
