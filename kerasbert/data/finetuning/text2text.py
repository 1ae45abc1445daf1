"""text2text examples ({"source", "target"}) -> encoder-decoder features.

The token layout (the one the Transformer's `Seq2SeqLM` is trained on, and
that `kerasbert.preprocessing.Text2TextPreprocessor` builds in tf.data and
the exported graph builds in serving):

    encoder_token_ids     source pieces + [end], padded with 0    int32 [N, S]
    encoder_padding_mask  1 on those tokens                       int32 [N, S]
    decoder_token_ids     [start] + target pieces, padded with 0  int32 [N, T]
    decoder_padding_mask  1 on those tokens                       int32 [N, T]
    y (labels)            target pieces + [end], padded with 0    int32 [N, T]

S = `sequence_length`, T = `target_length` (default S); the pieces are cut
to S - 1 and T - 1. start/end are the tokenizer's `[CLS]` / `[SEP]` (its
`cls_id`, `sep_id`: `<s>` / `</s>` for byte-level BPE). The labels are the
decoder inputs shifted left by one: position t predicts the piece after
the t-th.
"""

import numpy as np

from kerasbert.data.finetuning.examples import TaskDataError
from kerasbert.data.finetuning.features import TaskFeatures
from kerasbert.data.finetuning.features import check_length
from kerasbert.data.finetuning.features import tokenize_lists

ENCODER_INPUTS = ("encoder_token_ids", "encoder_padding_mask")
DECODER_INPUTS = ("decoder_token_ids", "decoder_padding_mask")
SEQ2SEQ_INPUTS = ENCODER_INPUTS + DECODER_INPUTS
PAD_ID = 0


def special_ids(tokenizer):
    """(start id, end id) of a tokenizer: its [CLS] and [SEP]."""
    return int(tokenizer.cls_id), int(tokenizer.sep_id)


def _rows(id_lists, length, before=(), after=()):
    """Lists of ids -> (ids int32 [N, length], mask int32 [N, length]): each
    row `before + ids + after`, the ids cut so that it fits."""
    room = length - len(before) - len(after)
    ids = np.full((len(id_lists), length), PAD_ID, np.int32)
    for row, pieces in enumerate(id_lists):
        values = list(before) + list(pieces[:room]) + list(after)
        ids[row, :len(values)] = values
    mask = np.zeros_like(ids)
    for row, pieces in enumerate(id_lists):
        mask[row, :len(before) + min(len(pieces), room) + len(after)] = 1
    return ids, mask


def convert_text2text(data, tokenizer, sequence_length, target_length=None):
    """A text2text `TaskData` -> `TaskFeatures` (module docstring).

    Args:
        data: examples {"source", "target"} (target None: no labels).
        tokenizer: a `kerasbert.text` tokenizer.
        sequence_length: S, the source's length (with its end token).
        target_length: T, the target's (with its start / end token);
            default S.

    Returns:
        `TaskFeatures`: x {the four inputs}, y int32 [N, T] or None,
        extras {"source_length", "target_length"} int32 [N] (pieces before
        truncation), stats: num_examples, truncated_sources,
        truncated_targets.
    """
    source_length = check_length(sequence_length, 2)
    target_length = check_length(target_length or sequence_length, 2)
    start, end = special_ids(tokenizer)
    sources = tokenize_lists(tokenizer, [e["source"] for e in data.examples])
    x = dict(zip(ENCODER_INPUTS, _rows(sources, source_length, after=(end,))))
    y, targets = None, None
    if data.has_labels:
        missing = [i for i, e in enumerate(data.examples) if e.get("target") is None]
        if missing:
            raise TaskDataError(f"{data.name}: example {missing[0]} has no target.")
        targets = tokenize_lists(tokenizer, [e["target"] for e in data.examples])
        x.update(zip(DECODER_INPUTS, _rows(targets, target_length, before=(start,))))
        y, _ = _rows(targets, target_length, after=(end,))
    else:
        # No targets: the decoder starts from [start] alone (generation).
        x.update(zip(DECODER_INPUTS, _rows([[]] * len(sources), target_length, before=(start,))))
    lengths = {"source_length": np.asarray([len(s) for s in sources], np.int32)}
    stats = {"num_examples": len(data), "num_features": len(data),
             "truncated_sources": int((lengths["source_length"] > source_length - 1).sum())}
    if targets is not None:
        lengths["target_length"] = np.asarray([len(t) for t in targets], np.int32)
        stats["truncated_targets"] = int((lengths["target_length"] > target_length - 1).sum())
    return TaskFeatures("text2text", x, y, extras=lengths, sequence_length=source_length,
                        stats=stats)
