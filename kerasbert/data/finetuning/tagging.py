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


def _row_labels(data, row, example, labelled):
    """The example's label ids (one per word), None when unlabelled;
    refuses an example whose labels do not match the task's."""
    tokens, labels = example["tokens"], example.get("labels")
    if (labels is not None) != labelled:
        raise TaskDataError(f"{data.name} example {row}: labels missing in a labelled task"
                            if labelled else f"{data.name} example {row}: labels in an unlabelled task")
    if labels is not None and len(labels) != len(tokens):
        raise TaskDataError(
            f"{data.name} example {row}: {len(tokens)} tokens but {len(labels)} labels."
        )
    if not labelled:
        return None
    return [label_id(labels[w], data.label_names, f"{data.name} example {row} word {w}")
            for w in range(len(tokens))]


def _fill_row(out, row, word_pieces, labels, tokenizer, t):
    """Writes `[CLS] pieces of every word [SEP]` into row `row` of the
    [N, T] arrays in `out` (ids, mask, word_ids, and y / weight when
    `labels`); returns (truncated words, empty words)."""
    position = 1
    out["ids"][row, 0] = tokenizer.cls_id
    truncated = empty = 0
    for w, pieces in enumerate(word_pieces):
        if not pieces:
            empty += 1
            continue
        if position >= t - 1:
            truncated += 1
            continue
        take = pieces[: t - 1 - position]
        out["ids"][row, position:position + len(take)] = take
        out["word_ids"][row, position:position + len(take)] = w
        if labels is not None:
            # The label goes on the word's first piece only.
            out["y"][row, position] = labels[w]
            out["weight"][row, position] = 1.0
        position += len(take)
    out["ids"][row, position] = tokenizer.sep_id
    out["mask"][row, : position + 1] = 1
    return truncated, empty


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
    out = {"ids": np.full((n, t), tokenizer.pad_id, np.int32), "mask": np.zeros((n, t), np.int32),
           "word_ids": np.full((n, t), -1, np.int32),
           "y": np.zeros((n, t), np.int32) if labelled else None,
           "weight": np.zeros((n, t), np.float32) if labelled else None}
    truncated_words = truncated_examples = empty_words = 0
    cursor = 0
    for row, example in enumerate(examples):
        labels = _row_labels(data, row, example, labelled)
        count = len(example["tokens"])
        truncated, empty = _fill_row(out, row, pieces[cursor:cursor + count], labels, tokenizer, t)
        cursor += count
        truncated_words += truncated
        empty_words += empty
        truncated_examples += truncated > 0
    _warn(data.name, truncated_words, truncated_examples, empty_words, t)
    x = {"input_word_ids": out["ids"], "input_mask": out["mask"],
         "input_type_ids": np.zeros((n, t), np.int32)}
    stats = {
        "num_examples": n, "num_features": n, "num_words": len(words),
        "truncated_words": truncated_words, "truncated_examples": truncated_examples,
        "empty_words": empty_words,
    }
    return TaskFeatures("tagging", x, out["y"], out["weight"], {"word_ids": out["word_ids"]},
                        data.label_names, t, stats)


def _warn(name, truncated_words, truncated_examples, empty_words, t):
    """Says how many words lost their prediction (cut, or no piece at all)."""
    if truncated_words:
        logger.warning(
            "%s: %d word(s) in %d example(s) did not fit in max_seq_length %d and have no "
            "prediction; raise max_seq_length (--max-seq-length) to keep them.",
            name, truncated_words, truncated_examples, t,
        )
    if empty_words:
        logger.warning("%s: %d word(s) tokenize to nothing and carry no label.", name, empty_words)
