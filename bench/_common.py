"""Helpers shared by the bench scripts (no TensorFlow import here)."""

import os
import pathlib
import platform
import statistics
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


def add_paths(*relative):
    """Puts the repo root (so `python bench/x.py` works from a checkout
    without installing) and `relative` folders of the repo on sys.path."""
    for p in (REPO_ROOT, *(REPO_ROOT / r for r in relative)):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))


def loadavg():
    """1-minute load average, or None where the OS has none."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def base_environment():
    """Versions and machine facts every bench records."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
    }


def write_json(path, payload):
    """Results JSON, written atomically (never half-written)."""
    from kerasbert.io_utils import atomic_write_json

    atomic_write_json(path, payload)


def interleaved(fns, repeats):
    """Calls each of `fns` ({name: fn() -> rate}) `repeats` times, in
    alternating order (a, b, c, then c, b, a, ...), so drift in machine load
    hits every contender alike. Returns {name: [rate per repeat]}."""
    names = list(fns)
    rates = {n: [] for n in names}
    for r in range(repeats):
        for n in (names if r % 2 == 0 else names[::-1]):
            rates[n].append(fns[n]())
    return rates


def median(values):
    return statistics.median(values)
