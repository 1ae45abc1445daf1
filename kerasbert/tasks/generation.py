"""Text generation with a GPT run: find the model and its tokenizer, encode
a prompt, decode the continuation (what `kerasbert generate` and the
generation export use).

The model is a `kerasbert pretrain` run directory of a GPT preset
(pretrainer.keras or backbone.keras; the tokenizer is the run's --vocab,
read from config.json), a `kerasbert finetune` directory of a GPT model
(model.keras and its tokenizer files), or a `.keras` file (then --vocab is
required). The prompt is encoded as the pretraining data was: the start
token ([CLS] / <s>) and the prompt's pieces; generation stops at the
separator ([SEP] / </s>), which ends every pretraining sequence.
"""

import json
import os

from kerasbert.errors import UsageError


def _read_config(run):
    path = os.path.join(run, "config.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _pretraining_tokenizer(run, config):
    """The tokenizer a pretraining run was trained with (config.json's
    pretrain.vocab, as given on its command line, else beside the run)."""
    from kerasbert.text import load_tokenizer

    vocab = config["pretrain"]["vocab"]
    candidates = [vocab] if os.path.isabs(vocab) else [vocab, os.path.join(run, vocab)]
    for path in candidates:
        if os.path.exists(path):
            meta = (config.get("data") or {}).get("metadata") or {}
            return load_tokenizer(path, lower_case=meta.get("lower_case"))
    raise UsageError(f"{run}/config.json names the vocabulary {vocab}, which is not there "
                     "any more: pass --vocab.")


def load_generator(model, vocab=None, lower_case=None):
    """(CausalLM, tokenizer, source description) for a run directory or a
    .keras file (see the module docstring)."""
    from kerasbert.models.gpt import GptBackbone
    from kerasbert.tasks.causal_lm import CausalLM
    from kerasbert.text import load_saved_tokenizer, load_tokenizer

    config = None
    if os.path.isdir(model):
        config = _read_config(model)
        for name in ("pretrainer.keras", "model.keras", "backbone.keras"):
            path = os.path.join(model, name)
            if os.path.isfile(path):
                break
        else:
            raise UsageError(f"--model {model}: no pretrainer.keras, model.keras or "
                             "backbone.keras (not a kerasbert pretrain or finetune run).")
    elif os.path.isfile(model) and model.endswith(".keras"):
        path = model
    else:
        raise UsageError(f"--model {model}: not a run directory or a .keras file.")
    from kerasbert.saving import load_model

    loaded = load_model(path)
    backbone = loaded if isinstance(loaded, GptBackbone) else getattr(loaded, "backbone", None)
    if not isinstance(backbone, GptBackbone):
        raise UsageError(f"{path} holds a {type(backbone or loaded).__name__}, not a GPT model: "
                         "generation needs a causal decoder (e.g. --preset gpt1).")
    lm = loaded if isinstance(loaded, CausalLM) else CausalLM(backbone)

    if vocab is not None:
        tokenizer = load_tokenizer(vocab, lower_case=lower_case)
    elif config is not None and "pretrain" in config:
        tokenizer = _pretraining_tokenizer(model, config)
    elif config is not None and ("tokenizer" in config or "vocab" in config):
        tokenizer = load_saved_tokenizer(model, config)
    else:
        raise UsageError(f"--model {model}: no config.json naming the tokenizer; pass --vocab.")
    if tokenizer.vocabulary_size != backbone.vocabulary_size:
        raise UsageError(f"The tokenizer has {tokenizer.vocabulary_size} tokens but the model's "
                         f"vocabulary has {backbone.vocabulary_size}.")
    return lm, tokenizer, path


def encode_prompt(tokenizer, prompt):
    """[start id] + the prompt's pieces (a list of ints)."""
    pieces = tokenizer.tokenize_ids(prompt).numpy().tolist()
    return [int(tokenizer.cls_id)] + pieces


def decode_tokens(tokenizer, ids):
    """Generated ids -> text (special tokens dropped)."""
    special = {int(tokenizer.cls_id), int(tokenizer.sep_id), int(tokenizer.pad_id)}
    ids = [i for i in ids if i not in special]
    if not ids:
        return ""
    import tensorflow as tf

    text = tokenizer.detokenize(tf.constant([ids], tf.int32))[0].numpy()
    return text.decode("utf-8", errors="replace")


def generate_text(lm, tokenizer, prompt, **options):
    """The completion (text after the prompt) of one prompt; `options` are
    `CausalLM.generate`'s."""
    ids = encode_prompt(tokenizer, prompt)
    new = lm.generate(ids, end_token_id=int(tokenizer.sep_id), **options)
    return decode_tokens(tokenizer, new)
