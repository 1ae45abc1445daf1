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
import sys

from kerasbert import io_utils
from kerasbert.convert import save_bert_checkpoint
from kerasbert.convert import to_keras_hub
from kerasbert.convert.hf_writer import hf_holds
from kerasbert.convert.hf_writer import tokenizer_kind_for
from kerasbert.convert.keras_hub import has_keras_hub_family
from kerasbert.convert.hf_writer import write_hf_directory
from kerasbert.errors import UsageError
from kerasbert.models import BertBackbone
from kerasbert import runs
from kerasbert.sources.handles import is_remote
from kerasbert.runs import default_vocab
from kerasbert.serving.hub_export import export_hub
from kerasbert.serving.task_serving import MODEL_INPUTS
from kerasbert.loading.backbones import load_backbone
from kerasbert.text.families import BPE
from kerasbert.text.families import SENTENCEPIECE
from kerasbert.text.tokenizer_loading import load_tokenizer
from kerasbert.text.tokenizer_loading import tokenizer_files
from kerasbert.text.tokenizer_loading import tokenizer_kind

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


def holding_targets(backbone, tokenizer):
    """The `--to` targets that write this backbone with this tokenizer
    (what a refusal suggests)."""
    kind = tokenizer_kind(tokenizer)
    holds = {"hf": hf_holds(backbone) and kind == tokenizer_kind_for(backbone),
             "keras-hub": has_keras_hub_family(backbone),
             "tf1": type(backbone) is BertBackbone and kind == "wordpiece",
             # the TF Hub pair reads a vocabulary file (the byte tokenizer has none)
             "tf-hub": (set(getattr(backbone, "input", {}) or {}) == set(MODEL_INPUTS)
                        and bool(tokenizer_files(tokenizer)))}
    return [target for target in TARGETS if holds[target]]


def _elsewhere(backbone, tokenizer, to):
    """The sentence a refusal of `--to to` ends with: the targets that do
    write the backbone, or that none does."""
    others = [t for t in holding_targets(backbone, tokenizer) if t != to]
    if others:
        return f"--to {' or '.join(others)} writes it."
    return (f"no other --to target writes a {type(backbone).__name__} with a "
            f"{tokenizer_kind(tokenizer)} tokenizer today.")


def _tf_hub_mlm(model):
    """Whether `--to tf-hub` writes the `.mlm` sub-object: convert has no
    --pretrainer / --no-mlm (export-hub has), so a lone .keras file without
    RUN/pretrainer.keras beside it is exported without (said on stderr)."""
    model = os.fspath(model)
    if is_remote(model) or not os.path.isfile(model):
        return True  # a run directory or handle: export_hub decides
    if os.path.isfile(runs.beside(model, runs.PRETRAINER)):
        return True
    print(f"note: no {runs.PRETRAINER} beside {model}: the encoder is exported without its "
          ".mlm sub-object (`kerasbert export-hub --pretrainer PATH` adds it).", file=sys.stderr)
    return False


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
                                          overwrite=overwrite,
                                          include_mlm=_tf_hub_mlm(model))["encoder"])
    backbone = load_backbone(model)
    tokenizer = load_tokenizer(vocab, lower_case=lower_case)
    if to == "tf1" and type(backbone) is not BertBackbone:
        raise UsageError(f"--to tf1 writes google-research/bert's BERT layout; got a "
                         f"{type(backbone).__name__}; {_elsewhere(backbone, tokenizer, to)}")
    if to == "hf" and not hf_holds(backbone):
        raise UsageError(f"--to hf writes no {type(backbone).__name__} today; "
                         f"{_elsewhere(backbone, tokenizer, to)}")
    if to == "keras-hub" and not has_keras_hub_family(backbone):
        raise UsageError(f"--to keras-hub: keras-hub has no {type(backbone).__name__} family; "
                         f"{_elsewhere(backbone, tokenizer, to)}")
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
