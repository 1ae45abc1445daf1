"""`convert_examples`: any `TaskData` -> `TaskFeatures` (dispatch by task type)."""

from kerasbert.data.finetuning.classification import convert_classification
from kerasbert.data.finetuning.examples import TaskDataError
from kerasbert.data.finetuning.multiple_choice import convert_multiple_choice
from kerasbert.data.finetuning.qa import convert_qa
from kerasbert.data.finetuning.tagging import convert_tagging

DEFAULT_MAX_SEQ_LENGTH = {"qa": 384}


def convert_examples(data, tokenizer, max_seq_length=None, **options):
    """Converts a task's examples to model features.

    Args:
        data: `TaskData` from `load_task`.
        tokenizer: `kerasbert.text.WordPieceTokenizer`.
        max_seq_length: T (default 384 for qa, 128 otherwise).
        **options: qa only: doc_stride, max_query_length, is_training,
            on_bad_answer.
    """
    if max_seq_length is None:
        max_seq_length = DEFAULT_MAX_SEQ_LENGTH.get(data.task_type, 128)
    if data.task_type == "qa":
        return convert_qa(data, tokenizer, max_seq_length, **options)
    if options:
        raise TaskDataError(f"Options {sorted(options)} apply to qa tasks only, not {data.task_type}.")
    if data.task_type in ("classification", "pair", "regression"):
        return convert_classification(data, tokenizer, max_seq_length)
    if data.task_type == "tagging":
        return convert_tagging(data, tokenizer, max_seq_length)
    if data.task_type == "multiple_choice":
        return convert_multiple_choice(data, tokenizer, max_seq_length)
    raise TaskDataError(f"Unknown task type {data.task_type!r}.")
