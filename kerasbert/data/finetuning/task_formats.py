"""What the data layer knows of a task type: the shape of its examples and of
its labels. One entry per task type; `kerasbert.tasks.task_types` adds the
model, the metrics and the serving module on top of it.

Code asks a format for a fact (`fmt.float_labels`, `fmt.per_choice`) rather
than comparing task type names, so a new task type whose examples look like
an existing one's needs no edits here beyond its entry.

    example kind   record shape (see examples.py)            converter
    "text"         text_a [, text_b], label                   classification.py
    "words"        tokens, labels (one per word)              tagging.py
    "squad"        id, question, context, answers            qa.py
    "choices"      context, question, choices, label          multiple_choice.py
    "text2text"    source, target (a string each)             text2text.py

    label kind     stored as (see schema.py)
    "class"        label_ids int64 [1], from label_names
    "number"       label_values float [1]
    "tag"          label_ids int64 [T] + label_weights, from label_names
    "span"         start_positions, end_positions int64 [1]
    "choice"       label_ids int64 [1], the index of the right choice
    "target"       the target text: decoder inputs and labels int32 [T]
                   (text2text.py; no label names)
"""

import dataclasses

from kerasbert.errors import TaskDataError

EXAMPLE_KINDS = ("text", "words", "squad", "choices", "text2text")
LABEL_KINDS = ("class", "number", "tag", "span", "choice", "target")


@dataclasses.dataclass(frozen=True)
class TaskFormat:
    """The data facts of one task type.

    Attributes:
        name: the task type's name ("classification", ...).
        example: example kind (module docstring): picks the file reader and
            the converter.
        label: label kind (module docstring): how labels parse and are stored.
        text_pair: the examples are sentence pairs (a second text column
            is required in files).
        sequence_length: default packed length T.
        options: names of converter options the type accepts (QA's
            doc_stride, max_query_length); others get none.
        convert: optional `(data, tokenizer, sequence_length, **options) ->
            TaskFeatures` replacing the example kind's converter.

    Example:

    >>> from kerasbert.data.finetuning import task_format
    >>> qa = task_format("qa")
    >>> qa.example, qa.label, qa.sequence_length             # SQuAD examples, 384 pieces
    ('squad', 'span', 384)
    >>> "doc_stride" in qa.options, task_format("pair").text_pair
    (True, True)
    """

    name: str
    example: str
    label: str
    text_pair: bool = False
    sequence_length: int = 128
    options: tuple = ()
    convert: object = None

    def __post_init__(self):
        if self.example not in EXAMPLE_KINDS:
            raise ValueError(f"Task format {self.name}: example kind {self.example!r} is not "
                             f"one of {EXAMPLE_KINDS}.")
        if self.label not in LABEL_KINDS:
            raise ValueError(f"Task format {self.name}: label kind {self.label!r} is not "
                             f"one of {LABEL_KINDS}.")

    @property
    def named_labels(self):
        """Labels are names from a label set (classes, tags)."""
        return self.label in ("class", "tag")

    @property
    def float_labels(self):
        return self.label == "number"

    @property
    def generates_text(self):
        """The model writes text (a target string per example): its outputs
        are generated, not read off one forward pass."""
        return self.label == "target"

    @property
    def per_choice(self):
        """Features are [C, T] per example (one row per choice)."""
        return self.example == "choices"


_FORMATS = {}


def register_format(fmt):
    """Adds a task format (replacing one of the same name); returns it."""
    _FORMATS[fmt.name] = fmt
    return fmt


def task_format(task_type):
    """The `TaskFormat` of a task type name; a clear error if unknown."""
    fmt = _FORMATS.get(task_type)
    if fmt is None:
        raise TaskDataError(
            f"Unknown task type {task_type!r}; expected one of {', '.join(_FORMATS)}.")
    return fmt


def task_type_names():
    """Registered task type names, in registration order."""
    return tuple(_FORMATS)


for _fmt in (
    TaskFormat("classification", "text", "class"),
    TaskFormat("pair", "text", "class", text_pair=True),
    TaskFormat("regression", "text", "number"),
    TaskFormat("tagging", "words", "tag"),
    TaskFormat("qa", "squad", "span", sequence_length=384,
               options=("doc_stride", "max_query_length", "is_training", "on_bad_answer")),
    TaskFormat("multiple_choice", "choices", "choice"),
    # Source and target truncated to T each (64: sentences, not documents).
    TaskFormat("text2text", "text2text", "target", sequence_length=64,
               options=("target_length",)),
):
    register_format(_fmt)

# The built-in task types (the CLI's --task-type choices).
TASK_TYPES = task_type_names()
