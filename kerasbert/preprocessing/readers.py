"""Which preprocessor class reads a tokenizer's output for a task.

A task model names its preprocessor class (`TextClassifier` ->
`TextClassifierPreprocessor`), which reads a subword tokenizer's ids. A
tokenizer family whose output is not token ids (ELMo's characters,
`kerasbert.text.CharacterTokenizer`) registers here the classes that stand
in for the tasks' own; a task it has none for is refused by name.

    family            task preprocessor               reads it
    (subword ids)     any                             the same class
    elmo_characters   TextClassifierPreprocessor      ElmoTextClassifierPreprocessor
                      TokenClassifierPreprocessor     ElmoTokenClassifierPreprocessor
"""

from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.errors import UsageError
from kerasbert.preprocessing import elmo_text_classifier_preprocessor  # noqa: F401 (registers)
from kerasbert.preprocessing import elmo_token_classifier_preprocessor  # noqa: F401 (registers)
from kerasbert.preprocessing.elmo_inputs import elmo_preprocessor
from kerasbert.text.families import ELMO_CHARACTERS

#: {tokenizer family: (task preprocessor class -> its counterpart or None)}
#: for the families that do not produce token ids.
_COUNTERPARTS = {ELMO_CHARACTERS: elmo_preprocessor}


def preprocessor_for(task_preprocessor_class, tokenizer, task_type):
    """The class that packs `tokenizer`'s output for a task.

    Args:
        task_preprocessor_class: the task model's `preprocessor_class`.
        tokenizer: a `kerasbert.text` tokenizer or `CharacterTokenizer`.
        task_type: the task type name (a character reader takes no pairs).

    Raises:
        UsageError: the tokenizer's family has no reader for the task.
    """
    counterpart = _COUNTERPARTS.get(getattr(type(tokenizer), "family", None))
    if counterpart is None:
        return task_preprocessor_class
    cls = counterpart(task_preprocessor_class)
    if cls is None or task_format(task_type).text_pair:
        raise UsageError(f"ELMo takes tagging and single-text classification tasks, not "
                         f"{task_type}.")
    return cls
