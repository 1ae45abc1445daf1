"""Errors the CLI reports without a traceback (exit code 2)."""


class UsageError(Exception):
    """Bad input from the user: a missing file, a wrong value, a mismatch.

    The message must name the problem (file, field, value)."""
