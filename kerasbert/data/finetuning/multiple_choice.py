"""Multiple-choice examples (SWAG and others) -> model features [N, C, T]."""

import numpy as np

from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.data.finetuning.examples import TaskDataError
from kerasbert.data.finetuning.features import MODEL_INPUTS, TaskFeatures, check_length, pack_batches
from kerasbert.text import make_packer, segment_layout


def convert_multiple_choice(data, tokenizer, sequence_length=128):
    """Per choice `[CLS] context [SEP] (question + " " +) choice [SEP]`.

    Pairs are truncated as BERT does (the longer segment first) and packed
    by the tokenizer's packer (RoBERTa: `<s> context </s></s> choice </s>`).

    Returns:
        `TaskFeatures`: x int32 [N, C, T]; y int32 [N] (the right choice) or
        None without labels.
    """
    if task_format(data.task_type).example != "choices":
        raise TaskDataError(f"convert_multiple_choice got a {data.task_type} task.")
    examples = data.examples
    if not examples:
        raise TaskDataError(f"{data.name} {data.split}: no examples to convert.")
    num_choices = len(examples[0]["choices"])
    for i, example in enumerate(examples):
        if len(example["choices"]) != num_choices:
            raise TaskDataError(
                f"{data.name} example {i}: {len(example['choices'])} choices, expected {num_choices}."
            )
    sequence_length = check_length(sequence_length, segment_layout(tokenizer).special_tokens())
    packer = make_packer(tokenizer, sequence_length)
    first, second = [], []
    for example in examples:
        question = (example.get("question") or "").strip()
        for choice in example["choices"]:
            first.append(example["context"])
            second.append(f"{question} {choice}" if question else choice)
    flat = pack_batches(packer, tokenizer, first, second)
    x = {name: flat[name].reshape(len(examples), num_choices, sequence_length) for name in MODEL_INPUTS}
    labels = [e.get("label") for e in examples]
    y = None
    if any(label is not None for label in labels):
        for i, label in enumerate(labels):
            if label is None or not 0 <= int(label) < num_choices:
                raise TaskDataError(
                    f"{data.name} example {i}: label {label!r} is not in the label set "
                    f"(choice index 0..{num_choices - 1})."
                )
        y = np.asarray(labels, np.int32)
    stats = {"num_examples": len(examples), "num_features": len(examples), "num_choices": num_choices}
    return TaskFeatures("multiple_choice", x, y, None, {}, None, sequence_length, stats)
