"""Text generation with a GPT run: find the model and its tokenizer, encode
a prompt, decode the continuation (what `kerasbert generate` and the
generation export use).

The model is a `kerasbert pretrain` run directory of a GPT preset
(pretrainer.keras or backbone.keras; the tokenizer is the run's --vocab,
read from config.json), a `kerasbert finetune` directory of a GPT model
(model.keras and its tokenizer files), a `.keras` file (then --vocab is
required), or a handle to a published GPT checkpoint
(hf://openai-community/openai-gpt or its directory; the tokenizer is the
one it was published with). The prompt is encoded as the pretraining data
was: the start token ([CLS] / <s>) and the prompt's pieces; generation
stops at the separator ([SEP] / </s>), which ends every pretraining
sequence. A published GPT-1 knows neither (its tokenizer appends them,
`Gpt1Tokenizer`): its prompts are the pieces alone, as it was trained, and
generation runs to the requested length.
"""


import tensorflow as tf

from kerasbert import runs
from kerasbert.errors import UsageError
from kerasbert.sources import source
from kerasbert.loading.backbones import load_backbone
from kerasbert.models import presets
from kerasbert.models.backbone import Backbone
from kerasbert.saving import load_model
from kerasbert.tasks.causal_lm import CausalLM
from kerasbert.text.tokenizer_loading import load_tokenizer


def load_generator(model, vocab=None, lower_case=None):
    """(CausalLM, tokenizer, path or handle of what was loaded) for a run
    directory, a .keras file or a model handle (see the module docstring)."""
    # A directory that is no published layout is a run: `runs.open_run`
    # names what it misses; the backbone loader checks every other source.
    found = source.resolve(model, presets)
    if not found.is_ours:
        return _published_generator(found, vocab, lower_case)
    if not found.is_run and vocab is None:
        raise UsageError(f"--model {model} is a .keras file: pass --vocab.")
    run = runs.open_run(found.path) if found.is_run else None
    path = run.model_file() if run is not None else found.path
    loaded = load_model(path)
    backbone = loaded if isinstance(loaded, Backbone) else getattr(loaded, "backbone", None)
    lm = loaded if isinstance(loaded, CausalLM) else _causal_lm(backbone, path, loaded)
    tokenizer = (run.tokenizer(vocab, lower_case) if run is not None
                 else load_tokenizer(vocab, lower_case=lower_case))
    _check_vocabulary(tokenizer, lm.backbone)
    return lm, tokenizer, path


def _published_generator(found, vocab, lower_case):
    """A GPT checkpoint from a handle (hf://openai-community/openai-gpt, a
    Hugging Face directory, ...) with the tokenizer it was published with."""
    backbone = load_backbone(found)
    lm = _causal_lm(backbone, found.handle, backbone)
    tokenizer = load_tokenizer(vocab if vocab is not None else found.path, lower_case=lower_case)
    _check_vocabulary(tokenizer, backbone)
    return lm, tokenizer, found.handle


def _causal_lm(backbone, source, loaded):
    if not getattr(backbone, "causal", False):
        raise UsageError(f"{source} holds a {type(backbone or loaded).__name__}, not a causal "
                         "decoder: generation needs one (e.g. --preset gpt1 or reformer_tiny).")
    return CausalLM(backbone)


def _check_vocabulary(tokenizer, backbone):
    """The model must have an embedding for every token the tokenizer makes,
    except the special tokens a tokenizer appends to a published vocabulary
    (GPT-1's): a model without them is never fed them (`model_ids`)."""
    size = backbone.vocabulary_size
    published = getattr(tokenizer, "published_size", tokenizer.vocabulary_size)
    if size not in (tokenizer.vocabulary_size, published):
        raise UsageError(f"The tokenizer has {tokenizer.vocabulary_size} tokens but the model's "
                         f"vocabulary has {size}.")


def model_ids(tokenizer, vocabulary_size):
    """(start id or None, end id or None): the token a prompt opens with
    and the one that ends generation, where the model has them (a published
    GPT-1 has neither: prompts are fed as they are, generation runs to its
    length)."""
    start, end = int(tokenizer.cls_id), int(tokenizer.sep_id)
    return (start if start < vocabulary_size else None,
            end if end < vocabulary_size else None)


def encode_prompt(tokenizer, prompt, vocabulary_size=None):
    """[start id] + the prompt's pieces (a list of ints); with
    `vocabulary_size`, ids the model does not have are left out (the start
    token, GPT-1's appended <unk>)."""
    size = tokenizer.vocabulary_size if vocabulary_size is None else vocabulary_size
    start, _ = model_ids(tokenizer, size)
    pieces = [i for i in tokenizer.tokenize_ids(prompt).numpy().tolist() if i < size]
    return ([start] if start is not None else []) + pieces


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
    size = lm.backbone.vocabulary_size
    ids = encode_prompt(tokenizer, prompt, size)
    if not ids:
        raise ValueError(f"The prompt {prompt!r} has no token the model knows.")
    _, end = model_ids(tokenizer, size)
    new = lm.generate(ids, end_token_id=end, **options)
    return decode_tokens(tokenizer, new)
