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
"""

from kerasbert.errors import UsageError
from kerasbert.serving.classification_serving import ClassificationServing
from kerasbert.serving.multiple_choice_serving import MultipleChoiceServing
from kerasbert.serving.qa_serving import QuestionAnsweringServing
from kerasbert.serving.tagging_serving import TaggingServing
from kerasbert.serving.text2text_serving import Text2TextServing
from kerasbert.tasks import task_types

_SERVINGS = {}


def register_serving(task_type, serving):
    """Exports models of the task type named `task_type` with `serving`
    (a `TaskServing` subclass); returns it."""
    _SERVINGS[task_type] = serving
    return serving


def serving_class(task_type):
    """The `TaskServing` subclass of the task type named `task_type`."""
    task_types.get(task_type)  # an unknown name: the error lists the registered ones
    if task_type not in _SERVINGS:
        raise UsageError(f"Task type {task_type!r} has no serving module: register one with "
                         "kerasbert.serving.task_servings.register_serving.")
    return _SERVINGS[task_type]


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
