"""Uniform example records per task type, and the `TaskData` that holds them.

Every source (TFDS, local files) yields plain dicts of one shape per task:

    classification / pair / regression:
        {"text_a": str, "text_b": str (pair only), "label": str | int | float | None}
        label: a class name or class id (classification, pair), a float
        (regression), or None when the split has no labels (prediction).
    tagging:
        {"tokens": [word, ...], "labels": [label, ...] | None}
        one label (name or id) per word.
    qa:
        {"id": str, "question": str, "context": str,
         "answers": [{"text": str, "answer_start": int}, ...],
         "is_impossible": bool}
        answer_start is a character (code point) offset into context.
    multiple_choice:
        {"context": str, "question": str (may be ""; SWAG's start phrase),
         "choices": [str, ...], "label": int | None}
    text2text:
        {"source": str, "target": str | None}
        the text to rewrite (translate, ...) and its rewriting; target None
        when the split has no targets (prediction).
"""

import dataclasses

from kerasbert.errors import TaskDataError  # noqa: F401 (its home before errors.py)
from kerasbert.data.finetuning.task_formats import task_format


def check_task_type(task_type):
    """The name, if it is a registered task type (a clear error if not)."""
    task_format(task_type)
    return task_type


@dataclasses.dataclass
class TaskData:
    """A task's examples with what converters and models need to know.

    Attributes:
        examples: list of example dicts (see module docstring).
        task_type: a registered task type (task_formats.py).
        label_names: class / tag names in id order (None for regression, qa,
            multiple choice, text2text).
        name: the task spec it was loaded from ("glue/cola", "csv:PATH", ...).
        split: the split or file it came from.
        has_labels: False when loaded for prediction from a split without
            labels (GLUE test splits): every label is None.

    Example:

    >>> import os, tempfile
    >>> from kerasbert.data.finetuning import TaskData, convert_examples
    >>> from kerasbert.text import WordPieceTokenizer, write_vocab
    >>> vocab = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> write_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...              "the", "movie", "was", "good", "bad"], vocab)
    >>> data = TaskData([{"text_a": "the movie was good", "label": "pos"},
    ...                  {"text_a": "bad", "label": "neg"}],
    ...                 "classification", label_names=["neg", "pos"])
    >>> features = convert_examples(data, WordPieceTokenizer(vocab), 8)
    >>> features.x["input_word_ids"].tolist(), features.y.tolist()
    ([[2, 5, 6, 7, 8, 3, 0, 0], [2, 9, 3, 0, 0, 0, 0, 0]], [1, 0])
    """

    examples: list
    task_type: str
    label_names: list = None
    name: str = ""
    split: str = ""
    has_labels: bool = True

    def __post_init__(self):
        check_task_type(self.task_type)
        if not self.name:  # Error messages name the task.
            self.name = self.task_type

    def __len__(self):
        return len(self.examples)

    def __iter__(self):
        return iter(self.examples)

    @property
    def num_labels(self):
        """Classes (tags) for classification/pair/tagging, 1 for regression,
        choices for multiple choice, None for qa."""
        fmt = task_format(self.task_type)
        if fmt.float_labels:
            return 1
        if fmt.per_choice:
            return len(self.examples[0]["choices"]) if self.examples else None
        return len(self.label_names) if self.label_names is not None else None


def infer_label_names(labels):
    """Sorted distinct labels as strings (numbers in numeric order), for
    local files that do not state their label set."""
    distinct = {str(label) for label in labels if label is not None}

    def key(name):
        try:
            return (0, float(name), name)
        except ValueError:
            return (1, 0.0, name)

    return sorted(distinct, key=key)


def label_id(label, label_names, where):
    """A label (name, or id) -> its id in label_names; clear error if not in the set.

    Args:
        where: names the example for the error, e.g. "example 12" or
            "train.csv line 14".
    """
    index = _label_index(label_names)
    if isinstance(label, bytes):
        label = label.decode("utf-8")
    if isinstance(label, str):
        if label in index:
            return index[label]
        stripped = label.strip()
        if stripped in index:
            return index[stripped]
        # "0"/"1" in a file whose classes have names: ids, unless names are digits.
        if stripped.isdigit() and int(stripped) < len(label_names) and not any(
            str(name).isdigit() for name in label_names
        ):
            return int(stripped)
    elif isinstance(label, (int,)) or (hasattr(label, "dtype") and getattr(label.dtype, "kind", "") in "iu"):
        label = int(label)
        if 0 <= label < len(label_names):
            return label
        if str(label) in index:  # Numeric class names, e.g. "0"/"1".
            return index[str(label)]
    shown = ", ".join(repr(n) for n in label_names[:20])
    more = f", ... ({len(label_names)} in all)" if len(label_names) > 20 else ""
    raise TaskDataError(
        f"{where}: label {label!r} is not in the label set [{shown}{more}]."
    )


_INDEX_CACHE = {}


def _label_index(label_names):
    key = tuple(label_names)
    index = _INDEX_CACHE.get(key)
    if index is None:
        index = {name: i for i, name in enumerate(label_names)}
        if len(_INDEX_CACHE) > 64:
            _INDEX_CACHE.clear()
        _INDEX_CACHE[key] = index
    return index
