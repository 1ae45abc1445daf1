"""The rows of a task file (CSV, TSV, JSONL) and the cell readers every
task type's loader shares (kerasbert.data.finetuning.file_sources): UTF-8
lines, the column names tried per key, text / list / label cells, and the
label-set check. Errors name the file, the line (row) and the column.
"""

import contextlib
import csv
import json
import os

from kerasbert.data.finetuning.examples import TaskDataError, label_id
from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.text.text_files import read_lines


def open_lines(path, newline=None):
    """A UTF-8 file's lines for a `with` block (UsageError with the byte
    offset at the first byte that is not UTF-8)."""
    return contextlib.closing(read_lines(path, newline=newline))

# Column key -> names tried when the caller does not set it.
CANDIDATES = {
    "text": ("text", "text_a", "sentence", "sentence1", "document", "review", "question1", "premise"),
    "text_pair": ("text_pair", "text_b", "sentence2", "question2", "hypothesis"),
    "label": ("label", "labels", "gold_label", "score"),
    "tokens": ("tokens", "words"),
    "labels": ("labels", "tags", "ner_tags", "ner"),
    "id": ("id", "qid"),
    "question": ("question", "start", "sent2", "startphrase"),
    "context": ("context", "sent1", "article", "passage"),
    "answers": ("answers",),
    "is_impossible": ("is_impossible",),
    "choices": ("choices", "endings", "options"),
    "source": ("source", "src", "input_text"),
    "target": ("target", "tgt", "target_text"),
}

COLUMN_KEYS = tuple(CANDIDATES)


class TableRows:
    """The rows of a CSV/TSV/JSONL file: `header` and (where, dict) pairs."""

    def __init__(self, path, fmt):
        if not os.path.isfile(path):
            raise TaskDataError(f"Task file not found: {path}")
        self.path, self.fmt = path, fmt
        self.rows = list(self._read())
        if not self.rows:
            raise TaskDataError(f"{path} has no examples (empty file).")
        if fmt == "jsonl":
            seen = {}
            for _, row in self.rows:
                seen.update(dict.fromkeys(row))
            self.header = list(seen)

    def _read(self):
        if self.fmt == "jsonl":
            with open_lines(self.path) as f:
                for number, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    where = f"{self.path} line {number}"
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as err:
                        raise TaskDataError(f"{where}: invalid JSON ({err.msg}).") from None
                    if not isinstance(row, dict):
                        raise TaskDataError(f"{where}: expected a JSON object, got {type(row).__name__}.")
                    yield where, row
            return
        options = {"delimiter": ","} if self.fmt == "csv" else {"delimiter": "\t", "quoting": csv.QUOTE_NONE}
        with open_lines(self.path, newline="") as f:
            reader = csv.reader(f, **options)
            header = next(reader, None)
            if header is None:
                return
            self.header = [name.strip() for name in header]
            for row in reader:
                if not row or not any(cell.strip() for cell in row):
                    continue
                where = f"{self.path} line {reader.line_num}"
                if len(row) != len(self.header):
                    raise TaskDataError(
                        f"{where}: {len(row)} fields but the header has {len(self.header)} "
                        f"({', '.join(self.header)})."
                    )
                yield where, dict(zip(self.header, row))

    def column(self, key, columns, required=True, task_type=""):
        """The file's column for `key`: the caller's name, else a candidate."""
        if columns and columns.get(key):
            name = columns[key]
            if name not in self.header:
                raise TaskDataError(
                    f"{self.path}: missing column {name!r} ({key}); columns: "
                    f"{', '.join(self.header)}."
                )
            return name
        for name in CANDIDATES.get(key, (key,)):
            if name in self.header:
                return name
        if required:
            raise TaskDataError(
                f"{self.path}: missing column for {key} of a {task_type} task (tried "
                f"{', '.join(CANDIDATES.get(key, (key,)))}); columns: {', '.join(self.header)}. "
                f"Name it with the {key} column option (e.g. --{key.replace('_', '-')}-column)."
            )
        return None


def cell(row, name, where):
    """`row`'s value of column `name` (TaskDataError naming the row when absent)."""
    if name not in row:
        raise TaskDataError(f"{where}: missing field {name!r}; fields: {', '.join(row)}.")
    value = row[name]
    return value


def as_text(value, where, name):
    """A cell as text; null, objects and lists are refused."""
    if value is None:
        raise TaskDataError(f"{where}: field {name!r} is empty (null).")
    if isinstance(value, (dict, list)):
        raise TaskDataError(f"{where}: field {name!r} must be text, got {type(value).__name__}.")
    return str(value)


def label_value(value):
    """A label cell as a string (integral numbers and booleans as "0", "1",
    ...), None when empty."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def check_labels(data, where_list):
    """Every label of a labelled TaskData must be in its label set."""
    if not data.has_labels or data.label_names is None:
        return
    for where, example in zip(where_list, data.examples):
        if task_format(data.task_type).label == "tag":
            for label in example["labels"]:
                label_id(label, data.label_names, where)
        else:
            label_id(example["label"], data.label_names, where)


def as_list(value, where, name):
    """A list cell: a JSON list, a string of space-separated items, or a list."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("["):
            try:
                value = json.loads(stripped)
            except json.JSONDecodeError:
                raise TaskDataError(f"{where}: field {name!r} is not a JSON list.") from None
        else:
            return stripped.split()
    if not isinstance(value, list):
        raise TaskDataError(f"{where}: field {name!r} must be a list, got {type(value).__name__}.")
    return value
