"""Rows of a batch and of raw inputs: the length order `Task.predict` runs
raw text in (short rows together, so each batch's padding is small) and the
way back to input order; per-token outputs of a batch cut to its longest row
padded back to T (`kerasbert.data.finetuning.padding`)."""

import numpy as np
from keras import ops


def pad_axis_1(tensor, length, value):
    """[B, L, ...] -> [B, length, ...], filled with `value` (L <= length)."""
    missing = length - ops.shape(tensor)[1]
    widths = [[0, 0], [0, missing]] + [[0, 0]] * (len(tensor.shape) - 2)
    return ops.pad(tensor, widths, constant_values=value)


def length_order(x):
    """Indices that sort raw Python inputs by length (the bytes of every
    string of a row: a text, a pair, a sentence's words, a question and
    its context), stable; None when `x` is not lists / arrays of rows."""
    parts = x if isinstance(x, tuple) else (x,)
    try:
        rows = {len(part) for part in parts}
    except TypeError:
        return None
    if len(rows) != 1 or any(isinstance(part, (str, bytes)) for part in parts):
        return None

    def size(value):
        if isinstance(value, (str, bytes)):
            return len(value)
        if isinstance(value, (list, tuple, np.ndarray)):
            return sum(size(v) for v in value)
        return 0

    lengths = [sum(size(part[i]) for part in parts) for i in range(rows.pop())]
    return np.argsort(np.asarray(lengths, np.int64), kind="stable")


def take_rows(x, order):
    """Rows `order` of inputs or results: a list, an array, a tuple of
    them (pairs) or a dict of arrays."""
    if isinstance(x, tuple):
        return tuple(take_rows(part, order) for part in x)
    if isinstance(x, dict):
        return {k: take_rows(v, order) for k, v in x.items()}
    if isinstance(x, np.ndarray):
        return x[np.asarray(order)]
    return [x[int(i)] for i in order]
