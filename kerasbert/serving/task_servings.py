"""Which `TaskServing` exports each task type: the serving half of the task
type registry (`kerasbert.tasks.task_types` holds the model, metrics and
data half; it sits below this layer, so the serving classes are registered
here, against the task type's name, and never named by strings there).

    task type        serving module
    classification   ClassificationServing
    pair             ClassificationServing
    regression       ClassificationServing
    tagging          TaggingServing
    qa               QuestionAnsweringServing
    multiple_choice  MultipleChoiceServing
    text2text        Text2TextServing

A new task type registers its `TaskType` and, here, its serving class
(`register_serving`), in the same file (ARCHITECTURE.md, "Where to add").

A tokenizer family whose output is not token ids (ELMo's characters) is
served by the counterpart of the task type's class (`serving_class(name,
tokenizer)`; `kerasbert.serving.elmo_serving`).
"""

from kerasbert.errors import UsageError
from kerasbert.serving.classification_serving import ClassificationServing
from kerasbert.serving.elmo_serving import elmo_serving
from kerasbert.serving.multiple_choice_serving import MultipleChoiceServing
from kerasbert.serving.qa_serving import QuestionAnsweringServing
from kerasbert.serving.tagging_serving import TaggingServing
from kerasbert.serving.text2text_serving import Text2TextServing
from kerasbert.tasks import task_types
from kerasbert.text.families import ELMO_CHARACTERS

_SERVINGS = {}

#: {tokenizer family: (serving class -> its counterpart)} for the families
#: whose output is not token ids.
_COUNTERPARTS = {ELMO_CHARACTERS: elmo_serving}


def register_serving(task_type, serving):
    """Exports models of the task type named `task_type` with `serving`
    (a `TaskServing` subclass); returns it."""
    _SERVINGS[task_type] = serving
    return serving


def serving_class(task_type, tokenizer=None):
    """The `TaskServing` subclass of the task type named `task_type`, or
    its counterpart that reads `tokenizer`'s output (ELMo's characters)."""
    task_types.get(task_type)  # an unknown name: the error lists the registered ones
    if task_type not in _SERVINGS:
        raise UsageError(f"Task type {task_type!r} has no serving module: register one with "
                         "kerasbert.serving.task_servings.register_serving.")
    counterpart = _COUNTERPARTS.get(getattr(type(tokenizer), "family", None))
    serving = _SERVINGS[task_type]
    return serving if counterpart is None else counterpart(serving)


for _name, _serving in (
    ("classification", ClassificationServing),
    ("pair", ClassificationServing),
    ("regression", ClassificationServing),
    ("tagging", TaggingServing),
    ("qa", QuestionAnsweringServing),
    ("multiple_choice", MultipleChoiceServing),
    ("text2text", Text2TextServing),
):
    register_serving(_name, _serving)
