"""`kerasbert convert`: a pretrained or fine-tuned model written in a peer's
layout, so it can be published and loaded by the peer libraries.

    --to hf         a Hugging Face model directory (config.json,
                    model.safetensors, the tokenizer's files); BERT,
                    RoBERTa, DistilBERT, ELECTRA, ALBERT, BigBird, GPT-1
                    (`kerasbert.convert.hf_writer`)
    --to keras-hub  a keras-hub preset (`save_to_preset` of the keras-hub
                    backbone and tokenizer of the same family)
    --to tf1        a google-research/bert directory (bert_config.json,
                    bert_model.ckpt.*, vocab.txt); BERT
    --to tf-hub     the TF Hub preprocess/ + encoder/ pair (`export-hub`)

The model is any handle (`kerasbert.loading.backbones`): a run
directory, a `.keras` file, hf://, a model directory. Every target is
written under a temporary name and renamed when complete.
"""

import os
import shutil

from kerasbert import io_utils
from kerasbert.convert import save_bert_checkpoint
from kerasbert.convert import to_keras_hub
from kerasbert.convert.hf_writer import tokenizer_kind_for
from kerasbert.convert.hf_writer import write_hf_directory
from kerasbert.errors import UsageError
from kerasbert.models import BertBackbone
from kerasbert.runs import default_vocab
from kerasbert.serving.hub_export import export_hub
from kerasbert.loading.backbones import load_backbone
from kerasbert.text.families import BPE
from kerasbert.text.families import SENTENCEPIECE
from kerasbert.text.loading import load_tokenizer
from kerasbert.text.loading import tokenizer_files
from kerasbert.text.loading import tokenizer_kind

TARGETS = ("hf", "keras-hub", "tf1", "tf-hub")


def _keras_hub_tokenizer(backbone, tokenizer):
    import keras_hub  # lazy: only this target needs the peer

    kind, files = tokenizer_kind(tokenizer), tokenizer_files(tokenizer)
    family = type(backbone).__name__.removesuffix("Backbone")
    cls = getattr(keras_hub.models, f"{family}Tokenizer")
    if kind == BPE:
        return cls(vocabulary=files[0], merges=files[1])
    if kind == SENTENCEPIECE:
        return cls(proto=files[0])
    return cls(vocabulary=files[0], lowercase=bool(tokenizer.lower_case))


def convert_model(model, to, output, vocab=None, lower_case=None, overwrite=False):
    """Writes `model` (a handle) in the `to` layout at `output`.

    Returns:
        the output path.

    Raises:
        UsageError: an unknown target, a family the target does not hold,
            an existing output without `overwrite`, and what loading raises.
    """
    if to not in TARGETS:
        raise UsageError(f"--to {to!r}: expected one of {', '.join(TARGETS)}.")
    output = os.path.abspath(os.fspath(output))
    if os.path.exists(output) and not overwrite:
        raise UsageError(f"{output} already exists (pass --overwrite to replace it).")
    if vocab is None:
        vocab = (default_vocab(backbone=model) if os.path.isfile(os.fspath(model))
                 else os.fspath(model))
    if to == "tf-hub":
        return os.path.dirname(export_hub(model, vocab, output, lower_case=lower_case,
                                          overwrite=overwrite)["encoder"])
    backbone = load_backbone(model)
    tokenizer = load_tokenizer(vocab, lower_case=lower_case)
    if to == "tf1" and type(backbone) is not BertBackbone:
        raise UsageError(f"--to tf1 writes google-research/bert's BERT layout; got a "
                         f"{type(backbone).__name__}. Use --to keras-hub or tf-hub.")
    wanted = "wordpiece" if to == "tf1" else tokenizer_kind_for(backbone) if to == "hf" else None
    if wanted is not None and tokenizer_kind(tokenizer) != wanted:
        raise UsageError(f"--to {to} carries a {wanted} tokenizer for a "
                         f"{type(backbone).__name__}; this tokenizer is "
                         f"{tokenizer_kind(tokenizer)}.")
    try:
        with io_utils.atomic_directory(output, overwrite=overwrite) as tmp:
            if to == "hf":
                added = {tokenizer.id_to_token(i): i
                         for i in sorted(getattr(tokenizer, "added_ids", ()))
                         if i < backbone.vocabulary_size}
                write_hf_directory(backbone, tmp, tokenizer_files(tokenizer),
                                   tokenizer.lower_case, added_tokens=added)
            elif to == "tf1":
                save_bert_checkpoint(backbone, os.path.join(tmp, "bert_model.ckpt"))
                shutil.copyfile(tokenizer_files(tokenizer)[0], os.path.join(tmp, "vocab.txt"))
            else:
                try:
                    peer = to_keras_hub(backbone)
                except (TypeError, ValueError) as err:
                    raise UsageError(f"--to keras-hub: {err}") from None
                peer.save_to_preset(tmp)
                _keras_hub_tokenizer(backbone, tokenizer).save_to_preset(tmp)
    except FileExistsError as err:
        raise UsageError(str(err)) from None
    return output
