"""Question-answering examples from files: SQuAD JSON (`load_squad_json`)
and the qa rows of a CSV / TSV / JSONL table (`qa_rows`, for
file_sources.load_table). Answers are [{"text", "answer_start"}] or
TFDS' {"text": [...], "answer_start": [...]}, JSON in CSV cells.
"""

import json
import os

from kerasbert.data.finetuning.examples import TaskData, TaskDataError
from kerasbert.data.finetuning.table_rows import as_text, cell
from kerasbert.text.text_files import read_text


def _answers(value, where, name):
    """A cell's answers as [{"text": str, "answer_start": int}]."""
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
    """A true/false cell: "1", "true", "yes" (any case) or a truthy value."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes")
    return bool(value)


def qa_rows(rows, task_type, columns, label_names, require_labels):
    """The qa `TaskData` of a table's rows (a `TableRows`)."""
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
            "question": as_text(cell(row, question_col, where), where, question_col),
            "context": as_text(cell(row, context_col, where), where, context_col),
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
