"""Token tagging (NER) examples -> model features with word->piece alignment.

Each word is tokenized on its own; its label goes on its FIRST piece, the
other pieces (and [CLS], [SEP], padding) get sample weight 0. For byte-level
BPE (RoBERTa), where a leading space is part of a word's first piece ("Ġin"),
every word after an example's first is tokenized with a space before it, so
the pieces are those of the space-joined sentence: what an exported model,
which tokenizes raw text, sees (kerasbert.serving.tagging_serving). Words whose
first piece does not fit in sequence_length are counted (stats
"truncated_words", a warning) rather than silently dropped; words that
tokenize to nothing (e.g. only control characters) are counted too
("empty_words"): they have no piece to carry their label.
"""

import logging

import numpy as np

from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.data.finetuning.examples import TaskDataError, label_id
from kerasbert.data.finetuning.features import TaskFeatures, check_length, tokenize_lists
from kerasbert.text.families import BPE
from kerasbert.text.tokenizer_loading import tokenizer_kind

logger = logging.getLogger(__name__)


def _in_context(tokenizer, examples):
    """Each example's words as the tokenizer sees them inside the sentence:
    with a leading space for byte-level BPE (not before the first word, nor
    for a blank word, which must stay empty), unchanged otherwise (WordPiece
    ignores spaces; SentencePiece marks every word "▁" anyway)."""
    if tokenizer_kind(tokenizer) != BPE:
        return [w for e in examples for w in e["tokens"]]
    return [w if i == 0 or not w.strip() else " " + w
            for e in examples for i, w in enumerate(e["tokens"])]


def convert_tagging(data, tokenizer, sequence_length=128):
    """`[CLS] pieces of every word [SEP]`, padded.

    Returns:
        `TaskFeatures`: x int32 [N, T]; y int32 [N, T] (tag id on first
        pieces, 0 elsewhere); sample_weight float32 [N, T];
        extras["word_ids"] int32 [N, T] (word index of every piece, -1 on
        [CLS]/[SEP]/padding). y and sample_weight are None without labels
        (word_ids still tell where each word starts: the first piece with
        its word id). stats: num_examples, num_features, num_words,
        truncated_words, truncated_examples, empty_words.
    """
    if task_format(data.task_type).example != "words":
        raise TaskDataError(f"convert_tagging got a {data.task_type} task.")
    examples = data.examples
    if not examples:
        raise TaskDataError(f"{data.name} {data.split}: no examples to convert.")
    t = check_length(sequence_length, 2)
    labelled = examples[0].get("labels") is not None
    words = [w for e in examples for w in e["tokens"]]
    pieces = tokenize_lists(tokenizer, _in_context(tokenizer, examples))
    n = len(examples)
    ids = np.full((n, t), tokenizer.pad_id, np.int32)
    mask = np.zeros((n, t), np.int32)
    word_ids = np.full((n, t), -1, np.int32)
    y = np.zeros((n, t), np.int32) if labelled else None
    weight = np.zeros((n, t), np.float32) if labelled else None
    truncated_words = truncated_examples = empty_words = 0
    cursor = 0
    for row, example in enumerate(examples):
        tokens, labels = example["tokens"], example.get("labels")
        if (labels is not None) != labelled:
            raise TaskDataError(f"{data.name} example {row}: labels missing in a labelled task"
                                if labelled else f"{data.name} example {row}: labels in an unlabelled task")
        if labels is not None and len(labels) != len(tokens):
            raise TaskDataError(
                f"{data.name} example {row}: {len(tokens)} tokens but {len(labels)} labels."
            )
        position = 1
        ids[row, 0] = tokenizer.cls_id
        cut = False
        for w in range(len(tokens)):
            word_pieces = pieces[cursor + w]
            label = None
            if labelled:
                label = label_id(labels[w], data.label_names, f"{data.name} example {row} word {w}")
            if not word_pieces:
                empty_words += 1
                continue
            if position >= t - 1:
                truncated_words += 1
                cut = True
                continue
            take = word_pieces[: t - 1 - position]
            ids[row, position:position + len(take)] = take
            word_ids[row, position:position + len(take)] = w
            if labelled:
                y[row, position] = label
                weight[row, position] = 1.0
            position += len(take)
        cursor += len(tokens)
        ids[row, position] = tokenizer.sep_id
        mask[row, : position + 1] = 1
        truncated_examples += cut
    if truncated_words:
        logger.warning(
            "%s: %d word(s) in %d example(s) did not fit in max_seq_length %d and have no "
            "prediction; raise max_seq_length (--max-seq-length) to keep them.",
            data.name, truncated_words, truncated_examples, t,
        )
    if empty_words:
        logger.warning("%s: %d word(s) tokenize to nothing and carry no label.", data.name, empty_words)
    x = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros((n, t), np.int32)}
    stats = {
        "num_examples": n, "num_features": n, "num_words": len(words),
        "truncated_words": truncated_words, "truncated_examples": truncated_examples,
        "empty_words": empty_words,
    }
    return TaskFeatures("tagging", x, y, weight, {"word_ids": word_ids}, data.label_names, t, stats)
