"""Input checks shared by the metric modules (pure NumPy).

Every metric takes a `labels` (gold) and a `predictions` argument; bad input
raises `ValueError` with a message that names the argument and the problem.
"""

import numpy as np


def as_1d(values, name):
    """`values` as a 1-D NumPy array; raises ValueError naming `name`."""
    if values is None:
        raise ValueError(f"{name} is None; expected a 1-D sequence of values")
    array = np.asarray(values)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    if array.ndim != 1:
        raise ValueError(
            f"{name} must be 1-D (one value per example), got shape {array.shape}"
            + ("; for class scores take the argmax over the last axis first"
               if array.ndim == 2 else "")
        )
    if array.size == 0:
        raise ValueError(f"{name} is empty: a metric needs at least one example")
    return array


def check_same_length(labels, predictions):
    if len(labels) != len(predictions):
        raise ValueError(
            f"labels and predictions differ in length: {len(labels)} labels, "
            f"{len(predictions)} predictions"
        )


def as_class_ids(values, name):
    """1-D integer class ids (ints, bools or integral floats)."""
    array = as_1d(values, name)
    if array.dtype == bool:
        return array.astype(np.int64)
    if np.issubdtype(array.dtype, np.integer):
        return array.astype(np.int64)
    if np.issubdtype(array.dtype, np.floating):
        if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            bad = array[~np.isfinite(array) | (array != np.round(array))][0]
            raise ValueError(
                f"{name} must hold integer class ids, found {bad.item()!r}; "
                "for class scores or probabilities take the argmax first"
            )
        return array.astype(np.int64)
    raise ValueError(
        f"{name} must hold integer class ids, got dtype {array.dtype}"
    )


def as_real(values, name):
    """1-D finite float64 values."""
    array = as_1d(values, name)
    try:
        array = array.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must hold numbers, got dtype {array.dtype}") from None
    finite = np.isfinite(array)
    if not np.all(finite):
        index = int(np.argmin(finite))
        raise ValueError(
            f"{name} holds a non-finite value {array[index].item()!r} at index {index}"
        )
    return array
