"""Multiple-choice examples from files: SWAG CSV (`load_swag`) and the
multiple_choice rows of a CSV / TSV / JSONL table (`choice_rows`, for
file_sources.load_table): a context, an optional question, the choices
(a list of columns, numbered columns ending0.. / choice0.. / option0..,
or one column holding a list) and the label (a choice index).
"""

from kerasbert.data.finetuning.examples import TaskData, TaskDataError
from kerasbert.data.finetuning.table_rows import TableRows, as_list, as_text, cell, label_value

SWAG_CHOICES = ("ending0", "ending1", "ending2", "ending3")
SWAG_COLUMNS = ("sent1", "sent2") + SWAG_CHOICES


def _choice_columns(rows, columns, task_type):
    """(choice column names, None) or (None, the column holding a list)."""
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


def choice_rows(rows, task_type, columns, label_names, require_labels, name=None):
    """The multiple_choice `TaskData` of a table's rows (a `TableRows`)."""
    context_col = rows.column("context", columns, task_type=task_type)
    question_col = rows.column("question", columns, required=False)
    choice_cols, list_col = _choice_columns(rows, columns, task_type)
    label_col = rows.column("label", columns, required=require_labels, task_type=task_type)
    examples = []
    num_choices = None
    for where, row in rows.rows:
        if choice_cols:
            choices = [as_text(cell(row, c, where), where, c) for c in choice_cols]
        else:
            choices = [str(c) for c in as_list(cell(row, list_col, where), where, list_col)]
        if num_choices is None:
            num_choices = len(choices)
        if len(choices) != num_choices or num_choices < 2:
            raise TaskDataError(
                f"{where}: {len(choices)} choices; every example needs the same number "
                f"(at least 2; the first had {num_choices})."
            )
        label = label_value(row.get(label_col)) if label_col else None
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
            "context": as_text(cell(row, context_col, where), where, context_col),
            "question": "" if question is None else str(question),
            "choices": choices,
            "label": label,
        })
    return TaskData(examples, "multiple_choice", None, name or f"{rows.fmt}:{rows.path}",
                    rows.path, label_col is not None)


def load_swag(path, require_labels=True):
    """A SWAG-format CSV (the public train.csv/val.csv/test.csv header:
    ,video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,...,ending3,label):
    context = sent1, question = sent2 (the start of the second sentence),
    4 choices = ending0..3, label = the right ending. test.csv has no label
    column: it loads for prediction only."""
    rows = TableRows(path, "csv")
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
    return choice_rows(rows, "multiple_choice", columns, None, require_labels, name=f"swag:{path}")
