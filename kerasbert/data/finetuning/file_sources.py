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

import contextlib
import csv
import json
import os

from kerasbert.data.finetuning.examples import (
    TaskData, TaskDataError, check_task_type, infer_label_names, label_id,
)
from kerasbert.data.finetuning.task_formats import TASK_TYPES
from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.text.text_files import read_lines, read_text


def _lines(path, newline=None):
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

SWAG_CHOICES = ("ending0", "ending1", "ending2", "ending3")
SWAG_COLUMNS = ("sent1", "sent2") + SWAG_CHOICES


class _Rows:
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
            with _lines(self.path) as f:
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
        with _lines(self.path, newline="") as f:
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


def _cell(row, name, where):
    if name not in row:
        raise TaskDataError(f"{where}: missing field {name!r}; fields: {', '.join(row)}.")
    value = row[name]
    return value


def _as_text(value, where, name):
    if value is None:
        raise TaskDataError(f"{where}: field {name!r} is empty (null).")
    if isinstance(value, (dict, list)):
        raise TaskDataError(f"{where}: field {name!r} must be text, got {type(value).__name__}.")
    return str(value)


def _label_value(value):
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _check_labels(data, where_list):
    """Every label of a labelled TaskData must be in its label set."""
    if not data.has_labels or data.label_names is None:
        return
    for where, example in zip(where_list, data.examples):
        if task_format(data.task_type).label == "tag":
            for label in example["labels"]:
                label_id(label, data.label_names, where)
        else:
            label_id(example["label"], data.label_names, where)


def infer_task_type(header):
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
    rows = _Rows(path, fmt)
    task_type = check_task_type(task_type) if task_type else infer_task_type(rows.header)
    loader = {"text": _sentences, "words": _tagging_rows, "squad": _qa_rows,
              "choices": _choice_rows,
              "text2text": _text2text_rows}[task_format(task_type).example]
    return loader(rows, task_type, columns or {}, label_names, require_labels)


def _label_column(rows, columns, task_type, require_labels):
    label_col = rows.column("label", columns, required=require_labels, task_type=task_type)
    return label_col


def _sentences(rows, task_type, columns, label_names, require_labels):
    text_col = rows.column("text", columns, task_type=task_type)
    fmt = task_format(task_type)
    pair_col = rows.column("text_pair", columns, required=fmt.text_pair, task_type=task_type)
    label_col = _label_column(rows, columns, task_type, require_labels)
    examples, wheres = [], []
    has_labels = label_col is not None
    for where, row in rows.rows:
        example = {"text_a": _as_text(_cell(row, text_col, where), where, text_col)}
        if pair_col:
            example["text_b"] = _as_text(_cell(row, pair_col, where), where, pair_col)
        label = _label_value(row.get(label_col)) if label_col else None
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
    _check_labels(data, wheres)
    return data


def _as_list(value, where, name):
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


def _tagging_rows(rows, task_type, columns, label_names, require_labels):
    tokens_col = rows.column("tokens", columns, task_type=task_type)
    labels_col = rows.column("labels", columns, required=require_labels, task_type=task_type)
    examples, wheres = [], []
    for where, row in rows.rows:
        tokens = [str(t) for t in _as_list(_cell(row, tokens_col, where), where, tokens_col)]
        labels = None
        if labels_col:
            labels = [_label_value(t) for t in _as_list(_cell(row, labels_col, where), where, labels_col)]
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
    _check_labels(data, wheres)
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

    with _lines(path) as f:
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


def _answers(value, where, name):
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except json.JSONDecodeError:
            raise TaskDataError(f"{where}: field {name!r} is not JSON.") from None
    if isinstance(value, dict):  # TFDS layout: {"text": [...], "answer_start": [...]}
        texts, starts = value.get("text", []), value.get("answer_start", [])
        if isinstance(texts, str):
            texts, starts = [texts], [starts]
        value = [{"text": t, "answer_start": s} for t, s in zip(texts, starts)]
    if not isinstance(value, list):
        raise TaskDataError(f"{where}: field {name!r} must be a list of answers.")
    answers = []
    for answer in value:
        if not isinstance(answer, dict) or "text" not in answer or "answer_start" not in answer:
            raise TaskDataError(
                f"{where}: each answer in {name!r} needs \"text\" and \"answer_start\", got {answer!r}."
            )
        try:
            start = int(answer["answer_start"])
        except (TypeError, ValueError):
            raise TaskDataError(f"{where}: answer_start {answer['answer_start']!r} is not an integer.") from None
        answers.append({"text": str(answer["text"]), "answer_start": start})
    return answers


def _is_true(value):
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)


def _qa_rows(rows, task_type, columns, label_names, require_labels):
    question_col = rows.column("question", columns, task_type=task_type)
    context_col = rows.column("context", columns, task_type=task_type)
    answers_col = rows.column("answers", columns, required=require_labels, task_type=task_type)
    id_col = rows.column("id", columns, required=False)
    impossible_col = rows.column("is_impossible", columns, required=False)
    examples = []
    for index, (where, row) in enumerate(rows.rows):
        answers = _answers(row.get(answers_col, []), where, answers_col) if answers_col else []
        impossible = _is_true(row.get(impossible_col)) if impossible_col else (
            answers_col is not None and not answers)
        examples.append({
            "id": str(row[id_col]) if id_col and row.get(id_col) not in (None, "") else str(index),
            "question": _as_text(_cell(row, question_col, where), where, question_col),
            "context": _as_text(_cell(row, context_col, where), where, context_col),
            "answers": [] if impossible else answers,
            "is_impossible": impossible,
        })
    return TaskData(examples, "qa", None, f"{rows.fmt}:{rows.path}", rows.path, answers_col is not None)


def load_squad_json(path, require_labels=True):
    """An official SQuAD v1.1/v2.0 JSON file:
    {"data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question",
    "answers": [{"text", "answer_start"}], "is_impossible"}]}]}]}."""
    if not os.path.isfile(path):
        raise TaskDataError(f"Task file not found: {path}")
    text = read_text(path)
    if not text.strip():
        raise TaskDataError(f"{path} has no examples (empty file).")
    try:
        squad = json.loads(text)
    except json.JSONDecodeError as err:
        raise TaskDataError(f"{path}: invalid JSON ({err.msg}, line {err.lineno}).") from None
    if not isinstance(squad, dict) or not isinstance(squad.get("data"), list):
        raise TaskDataError(f"{path}: not a SQuAD JSON file (no top-level \"data\" list).")
    examples = []
    for a, article in enumerate(squad["data"]):
        for p, paragraph in enumerate(article.get("paragraphs", [])):
            where = f"{path} data[{a}].paragraphs[{p}]"
            if "context" not in paragraph:
                raise TaskDataError(f"{where}: missing field 'context'.")
            context = paragraph["context"]
            for q, qa in enumerate(paragraph.get("qas", [])):
                qwhere = f"{where}.qas[{q}] (id {qa.get('id')!r})"
                for field in ("id", "question"):
                    if field not in qa:
                        raise TaskDataError(f"{qwhere}: missing field {field!r}.")
                impossible = _is_true(qa.get("is_impossible", False))
                answers = [] if impossible else _answers(qa.get("answers", []), qwhere, "answers")
                if require_labels and not impossible and not answers:
                    raise TaskDataError(f"{qwhere}: no answers and not marked is_impossible.")
                examples.append({
                    "id": str(qa["id"]), "question": str(qa["question"]), "context": context,
                    "answers": answers, "is_impossible": impossible,
                })
    if not examples:
        raise TaskDataError(f"{path} has no examples (no questions).")
    return TaskData(examples, "qa", None, f"squad_json:{path}", path)


def _choice_columns(rows, columns, task_type):
    explicit = columns.get("choices")
    if explicit:
        names = explicit.split(",") if isinstance(explicit, str) else list(explicit)
        if len(names) > 1:
            missing = [n for n in names if n not in rows.header]
            if missing:
                raise TaskDataError(
                    f"{rows.path}: missing choice column(s) {', '.join(map(repr, missing))}; "
                    f"columns: {', '.join(rows.header)}."
                )
            return names, None
        return None, rows.column("choices", {"choices": names[0]}, task_type=task_type)
    for prefix in ("ending", "choice", "option"):
        names = []
        while f"{prefix}{len(names)}" in rows.header:
            names.append(f"{prefix}{len(names)}")
        if len(names) >= 2:
            return names, None
    return None, rows.column("choices", {}, task_type=task_type)


def _choice_rows(rows, task_type, columns, label_names, require_labels, name=None):
    context_col = rows.column("context", columns, task_type=task_type)
    question_col = rows.column("question", columns, required=False)
    choice_cols, list_col = _choice_columns(rows, columns, task_type)
    label_col = rows.column("label", columns, required=require_labels, task_type=task_type)
    examples = []
    num_choices = None
    for where, row in rows.rows:
        if choice_cols:
            choices = [_as_text(_cell(row, c, where), where, c) for c in choice_cols]
        else:
            choices = [str(c) for c in _as_list(_cell(row, list_col, where), where, list_col)]
        if num_choices is None:
            num_choices = len(choices)
        if len(choices) != num_choices or num_choices < 2:
            raise TaskDataError(
                f"{where}: {len(choices)} choices; every example needs the same number "
                f"(at least 2; the first had {num_choices})."
            )
        label = _label_value(row.get(label_col)) if label_col else None
        if label is not None:
            try:
                label = int(label)
            except ValueError:
                raise TaskDataError(f"{where}: label {label!r} is not a choice index.") from None
            if not 0 <= label < num_choices:
                raise TaskDataError(
                    f"{where}: label {label} is not in the label set (choice index 0..{num_choices - 1})."
                )
        elif require_labels:
            raise TaskDataError(f"{where}: empty label (column {label_col!r}).")
        question = row.get(question_col) if question_col else ""
        examples.append({
            "context": _as_text(_cell(row, context_col, where), where, context_col),
            "question": "" if question is None else str(question),
            "choices": choices,
            "label": label,
        })
    return TaskData(examples, "multiple_choice", None, name or f"{rows.fmt}:{rows.path}",
                    rows.path, label_col is not None)


def _text2text_rows(rows, task_type, columns, label_names, require_labels):
    source_col = rows.column("source", columns, task_type=task_type)
    target_col = rows.column("target", columns, required=require_labels, task_type=task_type)
    examples = []
    for where, row in rows.rows:
        target = None
        if target_col:
            target = _as_text(_cell(row, target_col, where), where, target_col)
            if require_labels and not target.strip():
                raise TaskDataError(f"{where}: empty target (column {target_col!r}).")
        examples.append({"source": _as_text(_cell(row, source_col, where), where, source_col),
                         "target": target})
    return TaskData(examples, task_type, None, f"{rows.fmt}:{rows.path}", rows.path,
                    target_col is not None)


def load_swag(path, require_labels=True):
    """A SWAG-format CSV (the public train.csv/val.csv/test.csv header:
    ,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,...,ending3,label):
    context = sent1, question = sent2 (the start of the second sentence),
    4 choices = ending0..3, label = the right ending. test.csv has no label
    column: it loads for prediction only."""
    rows = _Rows(path, "csv")
    missing = [c for c in SWAG_COLUMNS if c not in rows.header]
    if missing:
        raise TaskDataError(
            f"{path}: not a SWAG file, missing column(s) {', '.join(missing)}; columns: "
            f"{', '.join(rows.header)}."
        )
    if require_labels and "label" not in rows.header:
        raise TaskDataError(f"{path}: no 'label' column (a SWAG test file); use it only for prediction.")
    columns = {"context": "sent1", "question": "sent2", "choices": list(SWAG_CHOICES)}
    if "label" in rows.header:
        columns["label"] = "label"
    return _choice_rows(rows, "multiple_choice", columns, None, require_labels, name=f"swag:{path}")


__all__ = ["load_table", "load_conll", "load_squad_json", "load_swag", "infer_task_type",
           "COLUMN_KEYS", "TASK_TYPES"]
