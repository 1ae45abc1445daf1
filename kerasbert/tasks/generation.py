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

import os

import tensorflow as tf

from kerasbert import runs
from kerasbert.errors import UsageError
from kerasbert.models.gpt import GptBackbone
from kerasbert.saving import load_model
from kerasbert.tasks.causal_lm import CausalLM
from kerasbert.text.loading import load_tokenizer


def load_generator(model, vocab=None, lower_case=None):
    """(CausalLM, tokenizer, path of the loaded .keras file) for a run
    directory or a .keras file (see the module docstring)."""
    if os.path.isdir(model):
        run = runs.open_run(model)
        path = run.model_file()
    elif os.path.isfile(model) and model.endswith(".keras"):
        if vocab is None:
            raise UsageError(f"--model {model} is a .keras file: pass --vocab.")
        run, path = None, model
    else:
        raise UsageError(f"--model {model}: not a run directory or a .keras file.")
    loaded = load_model(path)
    backbone = loaded if isinstance(loaded, GptBackbone) else getattr(loaded, "backbone", None)
    if not isinstance(backbone, GptBackbone):
        raise UsageError(f"{path} holds a {type(backbone or loaded).__name__}, not a GPT model: "
                         "generation needs a causal decoder (e.g. --preset gpt1).")
    lm = loaded if isinstance(loaded, CausalLM) else CausalLM(backbone)
    tokenizer = (run.tokenizer(vocab, lower_case) if run is not None
                 else load_tokenizer(vocab, lower_case=lower_case))
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
    text = tokenizer.detokenize(tf.constant([ids], tf.int32))[0].numpy()
    return text.decode("utf-8", errors="replace")


def generate_text(lm, tokenizer, prompt, **options):
    """The completion (text after the prompt) of one prompt; `options` are
    `CausalLM.generate`'s."""
    ids = encode_prompt(tokenizer, prompt)
    new = lm.generate(ids, end_token_id=int(tokenizer.sep_id), **options)
    return decode_tokens(tokenizer, new)
