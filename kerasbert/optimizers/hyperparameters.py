"""Checks of the numbers a user gives an optimizer (plain Python: a run's
flags are checked before TensorFlow loads)."""

import math

from kerasbert.errors import UsageError


def check_finite(flag, value, low=0.0, low_inclusive=False):
    """Refuses a hyperparameter that is NaN, infinite or at/below `low`.

    A plain `value <= 0` test lets NaN through (every comparison with NaN is
    false), and a NaN or infinite learning rate turns every weight into NaN
    at the first update: a run that "trains" to garbage.

    Raises:
        UsageError: naming the flag and the value.
    """
    above = value >= low if low_inclusive else value > low
    if not (isinstance(value, (int, float)) and math.isfinite(value) and above):
        bound = f">= {low:g}" if low_inclusive else f"> {low:g}"
        raise UsageError(f"{flag} {value}: must be a finite number {bound}.")


def check_learning_rate(value, flag="--learning-rate"):
    """A learning rate must be finite and > 0 (`check_finite`)."""
    check_finite(flag, value)
