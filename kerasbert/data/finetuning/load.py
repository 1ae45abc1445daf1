"""`load_task`: one entry point from a task spec to a `TaskData`.

Specs:
    glue/NAME            NAME in cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli (TFDS)
    squad, squad_v2      SQuAD v1.1 / v2.0 (TFDS; also squad/v1.1, squad/v2.0)
    conll2003            CoNLL-2003 NER (TFDS)
    wmt14_translate/SRC-TGT
                         WMT 2014 sentence pairs as text2text, SRC -> TGT
                         (TFDS config de-en, fr-en, cs-en, hi-en, ru-en, in
                         either direction; also wmt13 ... wmt19_translate)
    builtin/reverse_words
                         a built-in text2text task made offline: a sentence
                         of the built-in corpus -> its words in reverse order
                         (kerasbert.data.default_text2text)
    swag:PATH            a SWAG-format CSV file
    csv:PATH, tsv:PATH, jsonl:PATH
                         local files of any task type (columns configurable)
    conll:PATH           CoNLL-style "word ... label" tagging file
    squad_json:PATH      an official SQuAD-format JSON file
A bare PATH works too: its extension (.csv .tsv .jsonl .json .conll) picks
the reader.
"""

import os

from kerasbert.data import default_text2text
from kerasbert.data.finetuning import file_sources, tfds_sources
from kerasbert.data.finetuning.examples import TaskDataError, check_task_type

FILE_PREFIXES = ("csv", "tsv", "jsonl", "conll", "squad_json", "swag")

VALID_SPECS = (tfds_sources.TFDS_TASKS + default_text2text.TASKS
               + tuple(f"{p}:PATH" for p in FILE_PREFIXES))

_EXTENSIONS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "squad_json",
               ".conll": "conll", ".txt": None}

# The task type each fixed-format source has.
_FIXED_TYPES = {"conll": "tagging", "squad_json": "qa", "swag": "multiple_choice"}


def _unknown(spec):
    return TaskDataError(f"Unknown task {spec!r}; valid tasks: {', '.join(VALID_SPECS)}.")


def parse_task_spec(spec):
    """-> ("tfds", name) or (file prefix, path). Raises on unknown tasks."""
    if not spec or not isinstance(spec, str):
        raise _unknown(spec)
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in FILE_PREFIXES:
        if not rest:
            raise TaskDataError(f"Task {spec!r} needs a file path: {prefix}:PATH.")
        return prefix, rest
    if spec.startswith("glue/") or spec in tfds_sources.SQUAD_TASKS or spec == "conll2003":
        return "tfds", spec
    # Named datasets with splits (as TFDS's): the WMT sets, the built-in task.
    if tfds_sources.is_translation(spec) or spec in default_text2text.TASKS:
        return "tfds", spec
    if os.path.splitext(spec)[1].lower() in _EXTENSIONS and os.path.isfile(spec):
        kind = _EXTENSIONS[os.path.splitext(spec)[1].lower()]
        if kind:
            return kind, spec
    raise _unknown(spec)


def load_task(spec, split="train", *, task_type=None, columns=None, label_names=None,
              require_labels=True):
    """Loads a task's examples.

    Args:
        spec: task spec (see module docstring).
        split: TFDS split ("train", "validation", "test"; GLUE mnli's
            "validation" is validation_matched, conll2003's is "dev"). Ignored
            for files (the file is the split).
        task_type: one of classification, pair, regression, tagging, qa,
            multiple_choice, text2text. Fixed for TFDS tasks, CoNLL, SQuAD JSON and SWAG
            files; inferred from the columns of CSV/TSV/JSONL files when None
            (regression must be asked for).
        columns: {key: column name} for local files; keys text, text_pair,
            label, tokens, labels, id, question, context, answers,
            is_impossible, choices (a list of column names or one list column),
            source, target.
        label_names: the class / tag names in id order. Local files infer
            them (sorted) when None; pass the training set's names when
            loading its validation or prediction data, so ids agree.
        require_labels: True (training, evaluation): splits without labels
            are refused (GLUE test splits: label -1). False (prediction):
            they load with labels None.

    Returns:
        `TaskData`.
    """
    kind, target = parse_task_spec(spec)
    if task_type is not None:
        check_task_type(task_type)
    if kind == "tfds":
        data = _load_tfds(target, split, require_labels)
        if task_type and task_type != data.task_type:
            raise TaskDataError(
                f"Task {spec!r} is a {data.task_type} task, not {task_type}."
            )
        if label_names is not None and data.label_names is not None and list(label_names) != data.label_names:
            raise TaskDataError(
                f"Task {spec!r} has labels {data.label_names}, not {list(label_names)}."
            )
        return data
    fixed = _FIXED_TYPES.get(kind)
    if fixed and task_type and task_type != fixed:
        raise TaskDataError(f"{kind}: files hold {fixed} examples, not {task_type} ({spec!r}).")
    if kind == "conll":
        return file_sources.load_conll(target, label_names, require_labels)
    if kind == "squad_json":
        return file_sources.load_squad_json(target, require_labels)
    if kind == "swag":
        return file_sources.load_swag(target, require_labels)
    return file_sources.load_table(target, kind, task_type, columns, label_names, require_labels)


def _load_tfds(name, split, require_labels):
    if name in default_text2text.TASKS:
        return default_text2text.load_split(name, split)
    if tfds_sources.is_translation(name):
        return tfds_sources.load_translation(name, split, require_labels)
    if name.startswith("glue/"):
        return tfds_sources.load_glue(name[len("glue/"):], split, require_labels)
    if name in tfds_sources.SQUAD_TASKS:
        return tfds_sources.load_squad(name, split)
    return tfds_sources.load_conll2003(split)
