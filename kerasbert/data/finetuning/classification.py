"""Classification, sentence-pair and regression examples -> model features."""

import numpy as np

from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.data.finetuning.examples import TaskDataError, label_id
from kerasbert.data.finetuning.features import TaskFeatures, check_length, pack_batches
from kerasbert.text import make_packer, segment_layout


def convert_classification(data, tokenizer, sequence_length=128):
    """`[CLS] text_a [SEP] (text_b [SEP])` (RoBERTa: `<s> a </s></s> b
    </s>`), padded to sequence_length, by the tokenizer's packer
    (`kerasbert.text.make_packer`).

    Args:
        data: a `TaskData` of task type classification, pair or regression.
        tokenizer: a `kerasbert.text` tokenizer (WordPiece, SentencePiece or
            byte-level BPE).

    Returns:
        `TaskFeatures`: x int32 [N, T]; y int32 [N] (float32 [N] for
        regression), or None when the data has no labels. A label outside
        the label set raises an error naming the example index and label.
    """
    if task_format(data.task_type).example != "text":
        raise TaskDataError(f"convert_classification got a {data.task_type} task.")
    examples = data.examples
    if not examples:
        raise TaskDataError(f"{data.name or 'task'} {data.split}: no examples to convert.")
    pair = any("text_b" in e for e in examples)
    if pair and not all("text_b" in e for e in examples):
        missing = next(i for i, e in enumerate(examples) if "text_b" not in e)
        raise TaskDataError(f"{data.name} example {missing}: no text_b in a sentence-pair task.")
    sequence_length = check_length(sequence_length, segment_layout(tokenizer).special_tokens(pair))
    packer = make_packer(tokenizer, sequence_length)
    x = pack_batches(
        packer, tokenizer, [e["text_a"] for e in examples],
        [e["text_b"] for e in examples] if pair else None,
    )
    y = _labels(data)
    stats = {"num_examples": len(examples), "num_features": len(examples)}
    return TaskFeatures(data.task_type, x, y, None, {}, data.label_names, sequence_length, stats)


def _labels(data):
    labels = [e.get("label") for e in data.examples]
    missing = [i for i, label in enumerate(labels) if label is None]
    if len(missing) == len(labels):
        return None
    if missing:
        raise TaskDataError(
            f"{data.name} example {missing[0]}: no label, but other examples have labels."
        )
    if task_format(data.task_type).float_labels:
        try:
            return np.asarray([float(label) for label in labels], np.float32)
        except (TypeError, ValueError):
            bad = next(i for i, l in enumerate(labels) if not _is_number(l))
            raise TaskDataError(
                f"{data.name} example {bad}: regression label {labels[bad]!r} is not a number."
            ) from None
    if not data.label_names:
        raise TaskDataError(f"{data.name}: no label names for a {data.task_type} task.")
    return np.asarray(
        [label_id(label, data.label_names, f"{data.name} example {i}") for i, label in enumerate(labels)],
        np.int32,
    )


def _is_number(value):
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False
