"""Masked-token prediction with a masked-LM head: `load_masked_lm_from_handle`
and `fill_mask`.

The mask is written in the text as the tokenizer's own mask token
(`[MASK]` for WordPiece, ALBERT and ModernBERT, `<mask>` for byte-level
BPE) and cut out as the `tokenizers` library cuts it (with the whitespace
its lstrip / rstrip flags take). The text around it is tokenized as text
(a user cannot inject other control tokens), each mask becomes the mask
id, the row is packed `[CLS] ... [SEP]` (`<s> ... </s>`), and the head
scores the vocabulary at every mask.
"""

import os

import numpy as np
from keras import ops

from kerasbert import runs
from kerasbert.convert.hf_heads import pretraining_heads_from_hf
from kerasbert.convert.hf_heads import set_pretraining_heads
from kerasbert.errors import UsageError
from kerasbert.sources import source
from kerasbert.loading.backbones import backbone_source
from kerasbert.loading.published import load_published
from kerasbert.saving import load_model
from kerasbert.tasks.bert_pretrainer import BertPretrainer
from kerasbert.text.special_strings import AddedToken
from kerasbert.text.special_strings import split_at_token
from kerasbert.text.tokenizer_loading import segment_layout


def load_masked_lm_from_handle(handle):
    """A `BertPretrainer` (masked-LM head tied to the backbone's token
    embedding) with the handle's published head: a Hugging Face masked-LM
    checkpoint (`convert.hf_heads`), a kerasbert pretraining run or its
    pretrainer.keras.

    Raises:
        UsageError: a source without a masked-LM head (a bare encoder, a
            fine-tuned model, a built-in preset: random weights predict
            nothing).
    """
    found = backbone_source(handle)
    if found.is_preset:
        raise UsageError(f"{handle} is an architecture with random weights: give a published "
                         "masked-LM checkpoint or a pretraining run.")
    if found.is_ours:
        path = found.path
        if found.is_run and os.path.isfile(os.path.join(path, runs.PRETRAINER)):
            path = os.path.join(path, runs.PRETRAINER)
        model = load_model(path) if path.endswith(".keras") else None
        if getattr(model, "masked_lm_head", None) is None:
            raise UsageError(f"{handle}: no masked-LM head (give a pretraining run or its "
                             "pretrainer.keras).")
        return model
    if found.kind != source.HF:
        raise UsageError(f"{handle}: a {found.kind} source; published masked-LM heads are read "
                         "from Hugging Face checkpoints and kerasbert pretraining runs.")
    heads = pretraining_heads_from_hf(found.path, found.model_type)
    if heads is None:
        raise UsageError(f"{handle}: the checkpoint has no masked-LM head (a bare "
                         f"{found.model_type} encoder); use a *ForMaskedLM / *ForPreTraining one.")
    pretrainer = BertPretrainer(load_published(found), objectives=("mlm",))
    set_pretraining_heads(pretrainer, heads, handle)
    return pretrainer


def mask_string(tokenizer):
    return tokenizer.id_to_token(int(tokenizer.mask_id))


def mask_token(tokenizer):
    """The mask as its tokenizer's files register it (an `AddedToken` with
    their lstrip / rstrip: ModernBERT's and RoBERTa's take the space
    before), or a bare one where they register none."""
    mask = mask_string(tokenizer)
    registered = [t for t in getattr(tokenizer, "added_tokens", ()) if t.content == mask]
    return registered[0] if registered else AddedToken(mask)


def encode_with_masks(tokenizer, text, max_length):
    """Ids of `[CLS] text [SEP]` with each mask token as the mask id; the
    text is truncated so every mask stays (ValueError when none is there
    or they do not fit)."""
    mask = mask_string(tokenizer)
    parts = split_at_token(text, mask_token(tokenizer))
    if len(parts) < 2:
        raise ValueError(f"{text!r} has no {mask}: write the word to predict as {mask}.")
    pieces = [np.asarray(ids).tolist() for ids in tokenizer.tokenize_ids(parts).to_list()]
    ids = []
    for i, part in enumerate(pieces):
        ids += part
        if i < len(pieces) - 1:
            ids.append(int(tokenizer.mask_id))
    layout = segment_layout(tokenizer)
    if len(ids) + 2 > max_length:
        last = max(i for i, t in enumerate(ids) if t == tokenizer.mask_id)
        if last + 3 > max_length:
            raise ValueError(f"{text!r}: a {mask} lies past the {max_length}-token limit.")
        ids = ids[: max_length - 2]
    return [layout.start_id] + ids + [layout.sep_id]


def fill_mask(pretrainer, tokenizer, texts, top_k=5, max_length=128):
    """For each text, for each mask in it: the `top_k` (token, probability)
    pairs, most likely first."""
    rows = [encode_with_masks(tokenizer, text, max_length) for text in texts]
    length = max(map(len, rows))
    pad = segment_layout(tokenizer).pad_id
    ids = np.full((len(rows), length), pad, "int32")
    mask = np.zeros((len(rows), length), "int32")
    for r, row in enumerate(rows):
        ids[r, : len(row)], mask[r, : len(row)] = row, 1
    positions = [[i for i, t in enumerate(row) if t == tokenizer.mask_id] for row in rows]
    width = max(map(len, positions))
    padded = np.array([p + [0] * (width - len(p)) for p in positions], "int32")
    outputs = pretrainer.backbone({"input_word_ids": ids, "input_mask": mask,
                                   "input_type_ids": np.zeros_like(ids)})
    head = pretrainer.masked_lm_head
    logits = head.logits(head.hidden(outputs["sequence_output"], padded))
    probabilities = ops.convert_to_numpy(ops.softmax(ops.cast(logits, "float32"), axis=-1))
    results = []
    for r, row_positions in enumerate(positions):
        row = []
        for m in range(len(row_positions)):
            best = np.argsort(-probabilities[r, m])[:top_k]
            row.append([(tokenizer.id_to_token(int(i)), float(probabilities[r, m, i]))
                        for i in best])
        results.append(row)
    return results
