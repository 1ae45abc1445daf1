"""`convert_examples`: any `TaskData` -> `TaskFeatures`, by the task type's
example kind (task_formats.py) or its own converter."""

from kerasbert.data.finetuning.classification import convert_classification
from kerasbert.data.finetuning.examples import TaskDataError
from kerasbert.data.finetuning.multiple_choice import convert_multiple_choice
from kerasbert.data.finetuning.qa import convert_qa
from kerasbert.data.finetuning.tagging import convert_tagging
from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.data.finetuning.text2text import convert_text2text

CONVERTERS = {
    "text": convert_classification,
    "words": convert_tagging,
    "squad": convert_qa,
    "choices": convert_multiple_choice,
    "text2text": convert_text2text,
}


def convert_examples(data, tokenizer, sequence_length=None, **options):
    """Converts a task's examples to model features.

    Args:
        data: `TaskData` from `load_task`.
        tokenizer: `kerasbert.text.WordPieceTokenizer`.
        sequence_length: T (default: the task type's, 384 for qa, 64 for
            text2text, 128 otherwise).
        **options: the ones the task type takes (qa: doc_stride,
            max_query_length, is_training, on_bad_answer; text2text:
            target_length).
    """
    fmt = task_format(data.task_type)
    unknown = sorted(set(options) - set(fmt.options))
    if unknown:
        raise TaskDataError(f"Options {unknown} do not apply to {data.task_type} tasks"
                            + (f" (it takes {', '.join(fmt.options)})." if fmt.options else "."))
    if sequence_length is None:
        sequence_length = fmt.sequence_length
    convert = fmt.convert or CONVERTERS[fmt.example]
    return convert(data, tokenizer, sequence_length, **options)
