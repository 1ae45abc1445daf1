"""The packed lengths of a task preprocessor: the default of each task kind
and the one check against the backbone's positions.

The defaults live in one table, the task formats' (`kerasbert.data.
finetuning.task_formats`: 128 for text, words and choices, 384 for SQuAD
windows, 64 for text2text); everything else asks `default_sequence_length`.
Plain Python (no TensorFlow): `Task.from_preset` checks lengths under any
Keras backend.
"""

from kerasbert.data.finetuning.features import check_max_seq_length
from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.errors import UsageError

#: The task kind whose default a model that is no fine-tuning task type
#: takes (sentence embeddings, feature extraction, TF Hub preprocessors).
TEXT_TASK = "classification"


def default_sequence_length(task_type=TEXT_TASK):
    """The default packed length T of a task type (the task formats' table)."""
    return task_format(task_type).sequence_length


def packed_length(backbone, task_type=TEXT_TASK, sequence_length=None):
    """THE length check of a task preprocessor: T for `backbone`.

    A length given (`sequence_length`) must fit the backbone's position
    table: a clear error naming the positions otherwise. None takes the task
    type's default, cut to the positions of a backbone that has fewer (a
    BERT-Tiny with 128 positions runs QA at 128, not 384).

    Args:
        backbone: the task model's backbone (`max_sequence_length` when it
            has a position table; ELMo reads any length and has none).
        task_type: a registered task type name.
        sequence_length: int or None.

    Returns:
        int: T.
    """
    if sequence_length is not None:
        return int(check_max_seq_length(int(sequence_length), backbone))
    default = default_sequence_length(task_type)
    positions = getattr(backbone, "max_sequence_length", None)
    return min(default, int(positions)) if positions else default


def check_target_length(target_length, backbone):
    """A target length (`--max-target-length`) the decoder's position table
    holds: one line naming the flag otherwise. Returns it as an int."""
    target_length = int(target_length)
    limit = int(backbone.max_sequence_length)
    if not 2 <= target_length <= limit:
        raise UsageError(f"--max-target-length {target_length} must be in [2, {limit}] (the "
                         "backbone's max_sequence_length: the decoder's positions).")
    return target_length
