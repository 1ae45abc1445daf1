"""Task examples from local files: CSV, TSV, JSONL, CoNLL, SQuAD JSON, SWAG.

All files are read as UTF-8 (a BOM is ignored), so Korean, CJK and every
other script work; a file with a byte that is not UTF-8 is refused, naming
the file and the byte offset (`kerasbert.text.text_files`). CSV/TSV files need a header row; JSONL files hold one JSON
object per line. Column names are configurable per task type through
`columns` (keys below); unset keys fall back to common names.

    classification / pair / regression: text, text_pair, label
    tagging:          tokens, labels (JSONL lists, or CSV/TSV cells of
                      space-separated words/labels); CoNLL files instead:
                      "word ... label" per line, blank line between sentences
    qa:               id, question, context, answers, is_impossible
                      (answers: [{"text", "answer_start"}] or
                      {"text": [...], "answer_start": [...]}, JSON in CSV cells)
    multiple_choice:  context, question (optional, e.g. SWAG's start phrase),
                      choices (a list of column names, or one column holding
                      a list), label (choice index)
    text2text:        source, target (the text and its rewriting, e.g. a
                      sentence and its translation)

Errors name the file, the line (row) and the column.
"""

import os

from kerasbert.data.finetuning.choice_files import SWAG_CHOICES  # noqa: F401
from kerasbert.data.finetuning.choice_files import SWAG_COLUMNS  # noqa: F401
from kerasbert.data.finetuning.choice_files import choice_rows
from kerasbert.data.finetuning.choice_files import load_swag  # noqa: F401 (__all__)
from kerasbert.data.finetuning.examples import TaskData, TaskDataError, check_task_type
from kerasbert.data.finetuning.examples import infer_label_names
from kerasbert.data.finetuning.qa_files import load_squad_json  # noqa: F401 (__all__)
from kerasbert.data.finetuning.qa_files import qa_rows
from kerasbert.data.finetuning.table_rows import COLUMN_KEYS  # noqa: F401 (__all__)
from kerasbert.data.finetuning.table_rows import CANDIDATES, TableRows
from kerasbert.data.finetuning.table_rows import as_list, as_text, cell, check_labels
from kerasbert.data.finetuning.table_rows import label_value, open_lines
from kerasbert.data.finetuning.task_formats import TASK_TYPES  # noqa: F401 (__all__)
from kerasbert.data.finetuning.task_formats import task_format


def infer_task_type(header):
    """The task type a table's column names suggest (never regression)."""
    names = set(header)
    if names & set(CANDIDATES["tokens"]) and names & set(CANDIDATES["labels"]):
        return "tagging"
    if "context" in names and "question" in names and "answers" in names:
        return "qa"
    if names & set(CANDIDATES["source"]) and names & set(CANDIDATES["target"]):
        return "text2text"
    if names & set(CANDIDATES["choices"]) or {"ending0", "ending1"} <= names or {"choice0", "choice1"} <= names:
        return "multiple_choice"
    if names & set(CANDIDATES["text_pair"]):
        return "pair"
    return "classification"


def load_table(path, fmt, task_type=None, columns=None, label_names=None, require_labels=True):
    """Examples of any task type from a CSV ("csv"), TSV ("tsv") or JSONL
    ("jsonl") file. `task_type` None: inferred from the columns (regression
    must be asked for)."""
    rows = TableRows(path, fmt)
    task_type = check_task_type(task_type) if task_type else infer_task_type(rows.header)
    loader = {"text": _sentences, "words": _tagging_rows, "squad": qa_rows,
              "choices": choice_rows,
              "text2text": _text2text_rows}[task_format(task_type).example]
    return loader(rows, task_type, columns or {}, label_names, require_labels)


def _sentences(rows, task_type, columns, label_names, require_labels):
    text_col = rows.column("text", columns, task_type=task_type)
    fmt = task_format(task_type)
    pair_col = rows.column("text_pair", columns, required=fmt.text_pair, task_type=task_type)
    label_col = rows.column("label", columns, required=require_labels, task_type=task_type)
    examples, wheres = [], []
    has_labels = label_col is not None
    for where, row in rows.rows:
        example = {"text_a": as_text(cell(row, text_col, where), where, text_col)}
        if pair_col:
            example["text_b"] = as_text(cell(row, pair_col, where), where, pair_col)
        label = label_value(row.get(label_col)) if label_col else None
        if label is None and require_labels:
            raise TaskDataError(f"{where}: empty label (column {label_col!r}).")
        if label is not None and fmt.float_labels:
            try:
                label = float(label)
            except ValueError:
                raise TaskDataError(
                    f"{where}: regression label {label!r} (column {label_col!r}) is not a number."
                ) from None
        example["label"] = label
        examples.append(example)
        wheres.append(where)
    if fmt.float_labels:
        label_names = None
    elif label_names is None:
        if not has_labels:
            raise TaskDataError(
                f"{rows.path}: no label column and no label names; pass label_names "
                "(e.g. those of the training data) to predict."
            )
        label_names = infer_label_names(e["label"] for e in examples)
    data = TaskData(examples, task_type, list(label_names) if label_names else None,
                    f"{rows.fmt}:{rows.path}", rows.path, has_labels)
    check_labels(data, wheres)
    return data


def _tagging_rows(rows, task_type, columns, label_names, require_labels):
    tokens_col = rows.column("tokens", columns, task_type=task_type)
    labels_col = rows.column("labels", columns, required=require_labels, task_type=task_type)
    examples, wheres = [], []
    for where, row in rows.rows:
        tokens = [str(t) for t in as_list(cell(row, tokens_col, where), where, tokens_col)]
        labels = None
        if labels_col:
            labels = [label_value(t) for t in as_list(cell(row, labels_col, where), where, labels_col)]
            if len(labels) != len(tokens):
                raise TaskDataError(
                    f"{where}: {len(tokens)} tokens ({tokens_col!r}) but {len(labels)} labels "
                    f"({labels_col!r})."
                )
        examples.append({"tokens": tokens, "labels": labels})
        wheres.append(where)
    return _tagging_data(examples, wheres, label_names, f"{rows.fmt}:{rows.path}", rows.path,
                         labels_col is not None)


def _tagging_data(examples, wheres, label_names, name, split, has_labels):
    if label_names is None:
        if not has_labels:
            raise TaskDataError(f"{split}: no labels and no label names; pass label_names to predict.")
        label_names = infer_label_names(l for e in examples for l in e["labels"])
        if "O" in label_names:  # Conventional: the outside tag first (id 0).
            label_names.remove("O")
            label_names.insert(0, "O")
    data = TaskData(examples, "tagging", list(label_names), name, split, has_labels)
    check_labels(data, wheres)
    return data


def load_conll(path, label_names=None, require_labels=True):
    """A CoNLL-style tagging file: one "word [other columns] label" per
    line (whitespace separated: the first column is the word, the last the
    label), a blank line between sentences, -DOCSTART- lines skipped. Files
    with only words (one column) load for prediction."""
    if not os.path.isfile(path):
        raise TaskDataError(f"Task file not found: {path}")
    examples, wheres = [], []
    tokens, labels, start = [], [], None
    widths = set()

    def flush():
        if tokens:
            examples.append({"tokens": list(tokens), "labels": list(labels) if 2 in widths else None})
            wheres.append(f"{path} line {start}")
        tokens.clear()
        labels.clear()

    with open_lines(path) as f:
        for number, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                flush()
                continue
            if parts[0] == "-DOCSTART-":
                flush()
                continue
            width = 1 if len(parts) == 1 else 2
            widths.add(width)
            if len(widths) > 1:
                raise TaskDataError(
                    f"{path} line {number}: {line.strip()!r} has "
                    f"{'no label' if width == 1 else 'a label'} but earlier lines "
                    f"{'do' if width == 1 else 'do not'}."
                )
            if not tokens:
                start = number
            tokens.append(parts[0])
            labels.append(parts[-1] if width == 2 else None)
        flush()
    if not examples:
        raise TaskDataError(f"{path} has no examples (empty file).")
    has_labels = 2 in widths
    if require_labels and not has_labels:
        raise TaskDataError(f"{path}: no labels (one column per line); it can only be predicted.")
    return _tagging_data(examples, wheres, label_names, f"conll:{path}", path, has_labels)


def _text2text_rows(rows, task_type, columns, label_names, require_labels):
    source_col = rows.column("source", columns, task_type=task_type)
    target_col = rows.column("target", columns, required=require_labels, task_type=task_type)
    examples = []
    for where, row in rows.rows:
        target = None
        if target_col:
            target = as_text(cell(row, target_col, where), where, target_col)
            if require_labels and not target.strip():
                raise TaskDataError(f"{where}: empty target (column {target_col!r}).")
        examples.append({"source": as_text(cell(row, source_col, where), where, source_col),
                         "target": target})
    return TaskData(examples, task_type, None, f"{rows.fmt}:{rows.path}", rows.path,
                    target_col is not None)


__all__ = ["load_table", "load_conll", "load_squad_json", "load_swag", "infer_task_type",
           "COLUMN_KEYS", "TASK_TYPES"]
