"""Errors the CLI reports without a traceback (exit code 2)."""


class UsageError(Exception):
    """Bad input from the user: a missing file, a wrong value, a mismatch.

    The message must name the problem (file, field, value)."""


class TaskDataError(UsageError, ValueError):
    """Bad fine-tuning task data or task options. A `UsageError` (the CLI
    prints the message and exits non-zero, no traceback) and a `ValueError`
    (for library callers). The message names the file / example, field and
    value.

    Example:

    >>> from kerasbert.data.finetuning import parse_task_spec
    >>> parse_task_spec("csv:reviews.csv")                   # a known kind of task
    ('csv', 'reviews.csv')
    >>> parse_task_spec("reviews")
    Traceback (most recent call last):
    ...
    kerasbert.errors.TaskDataError: Unknown task 'reviews'; valid tasks: glue/cola, ...
    """


class CheckpointError(UsageError, ValueError):
    """A model file that cannot be trusted or read: a config value no model
    can have, a JSON file or header past the limits, a weight file whose
    tensors contradict its config or each other. The message names the
    file and the field or tensor."""


#: Marks the graph assertions on a dataset's values (a `tf.data` label
#: outside the label set) that `Task.fit` and `evaluate` report as one
#: `TaskDataError` (`kerasbert.tasks.raw_text_fit.data_errors`).
DATA_ERROR = "kerasbert data error:"
