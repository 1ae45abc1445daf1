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


def length_order(x, count=None):
    """Indices that sort raw Python inputs by length (every string of a
    row: a text, a pair, a sentence's words, a question and its context),
    stable; None when `x` is not lists / arrays of rows.

    Args:
        x: raw rows (a list or array, or a tuple of them: pairs).
        count: list of strings -> their lengths (the preprocessor's
            `piece_counts`: rows sorted by pieces make batches of 32
            built-in task sentences 24.6 pieces wide on average, by
            characters 33.1); None counts characters.
    """
    parts = x if isinstance(x, tuple) else (x,)
    try:
        rows = {len(part) for part in parts}
    except TypeError:
        return None
    if len(rows) != 1 or any(isinstance(part, (str, bytes)) for part in parts):
        return None
    num_rows = rows.pop()
    strings, owners = [], []

    def gather(value, row):
        if isinstance(value, (str, bytes)):
            strings.append(value)
            owners.append(row)
        elif isinstance(value, (list, tuple, np.ndarray)):
            for item in value:
                gather(item, row)

    for part in parts:
        for row in range(num_rows):
            gather(part[row], row)
    sizes = count(strings) if count is not None and strings else [len(s) for s in strings]
    lengths = np.bincount(np.asarray(owners, np.int64), weights=np.asarray(sizes, np.float64),
                          minlength=num_rows) if strings else np.zeros(num_rows)
    return np.argsort(lengths, kind="stable")


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
