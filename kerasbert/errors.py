"""Errors the CLI reports without a traceback (exit code 2)."""


class UsageError(Exception):
    """Bad input from the user: a missing file, a wrong value, a mismatch.

    The message must name the problem (file, field, value)."""


class TaskDataError(UsageError, ValueError):
    """Bad fine-tuning task data or task options. A `UsageError` (the CLI
    prints the message and exits non-zero, no traceback) and a `ValueError`
    (for library callers). The message names the file / example, field and
    value."""
