"""The model a pretraining run trains: the backbone (a preset's
architecture, or published weights to continue from), the pretraining
task model of its family (`make_pretrainer`), and weights taken from
another run or a published checkpoint (`init_weights_from`, --init-from).
"""

import os

import tensorflow as tf

from kerasbert import runs
from kerasbert.convert.hf_heads import discriminator_head_from_hf
from kerasbert.convert.hf_heads import pretraining_heads_from_hf
from kerasbert.convert.hf_heads import set_discriminator_head
from kerasbert.convert.hf_heads import set_pretraining_heads
from kerasbert.errors import UsageError
from kerasbert.loading.backbones import load_backbone
from kerasbert.models import presets
from kerasbert.models.electra import ElectraBackbone
from kerasbert.models.electra.electra_presets import published_generator_fraction
from kerasbert.models.vocabulary_growth import grow_vocabulary
from kerasbert.saving import load_model
from kerasbert.sources import handles
from kerasbert.sources.source import HF
from kerasbert.sources.source import resolve
from kerasbert.tasks import BertPretrainer
from kerasbert.tasks import CausalLM
from kerasbert.tasks import ElectraPretrainer
from kerasbert.tasks.elmo_pretrainer import ElmoPretrainer
from kerasbert.tasks.elmo_pretrainer import token_character_table
from kerasbert.training.checkpoints import list_checkpoints
from kerasbert.training.configs import reads_characters

OBJECTIVES_BY_DATA = {"nsp": ("mlm", "nsp"), "sop": ("mlm", "sop"), "none": ("mlm",)}
#: ELMo: the full softmax up to this many words, a sampled one (this many
#: draws, log-uniform) above: the published biLM sampled 8192.
ELMO_FULL_SOFTMAX_WORDS = ELMO_NUM_SAMPLED = 8192


# --- model ------------------------------------------------------------------


def build_backbone(config, vocab_size, sequence_length, added_tokens=0):
    """The backbone to pretrain; `added_tokens`: how many of the vocabulary's
    tokens the tokenizer appended to a published one (GPT-1's specials),
    for which a checkpoint's embeddings grow."""
    overrides = dict(config.overrides)
    if reads_characters(config.preset):
        # ELMo has no token table: it reads each token's characters
        # (`make_pretrainer`); the vocabulary sizes its softmax only.
        try:
            return load_backbone(config.preset, **overrides)
        except (ValueError, TypeError) as err:
            raise UsageError(str(err)) from None
    if overrides.get("vocabulary_size", vocab_size) != vocab_size:
        raise UsageError(f"vocabulary_size={overrides['vocabulary_size']} differs from "
                         f"--vocab ({vocab_size} tokens).")
    published = vocab_size - added_tokens
    try:
        # A preset builds an architecture; a handle (hf://, a model
        # directory, ...) continues pretraining from published weights.
        overrides["vocabulary_size"] = vocab_size
        backbone = load_backbone(config.preset, **overrides)
    except UsageError:
        if not added_tokens or presets.is_preset(config.preset):
            raise
        overrides["vocabulary_size"] = published
        backbone = load_backbone(config.preset, **overrides)
    except (ValueError, TypeError) as err:
        raise UsageError(str(err)) from None
    if backbone.vocabulary_size == published != vocab_size:
        backbone = grow_vocabulary(backbone, vocab_size)
    if sequence_length > backbone.max_sequence_length:
        raise UsageError(f"The data's sequences have {sequence_length} tokens but {config.preset} "
                         f"has {backbone.max_sequence_length} positions.")
    return backbone


def make_pretrainer(backbone, objectives, tokens=None, tokenizer=None):
    """The pretraining task model for the backbone's family (built inside
    the strategy scope by the caller).

    Args:
        backbone: a kerasbert backbone.
        objectives: from the data's objective (`OBJECTIVES_BY_DATA`).

    Returns:
        A model with the training-loop protocol of kerasbert.training.loop.
        A model with `needs_masked_lm = False` (the causal LM, ELMo) is fed
        unmasked batches (`pretraining_dataset(masked_lm=False)`).

    ELMo (`tokens`: the vocabulary's strings, `tokenizer`: its [CLS] / [SEP]
    ids) trains its forward and backward LMs on the same token-id records:
    each token's characters come from a constant [V, C] table of the
    vocabulary's strings, and the targets are the next / previous token
    ([CLS] and [SEP] stand for <S> and </S>).
    """
    if "input_char_ids" in backbone.input:
        if tuple(objectives) != ("mlm",):
            raise UsageError(
                "ELMo trains two language models on single sequences: write the data with "
                f"--objective none; this data has the {objectives[-1]} objective.")
        size = len(tokens)
        return ElmoPretrainer(
            backbone, size, bos_id=tokenizer.cls_id, eos_id=tokenizer.sep_id,
            num_sampled=0 if size <= ELMO_FULL_SOFTMAX_WORDS else ELMO_NUM_SAMPLED,
            token_characters=token_character_table(tokens, backbone.max_characters_per_token))

    if getattr(backbone, "causal", False):
        # GPT, a causal Reformer: next-token prediction on whole sequences
        # (--objective none).
        if tuple(objectives) != ("mlm",):
            raise UsageError(
                f"A causal backbone ({type(backbone).__name__}) trains a causal LM on single "
                "sequences: write the data with --objective none (this data has the "
                f"{objectives[-1]} objective).")

        return CausalLM(backbone)

    if isinstance(backbone, ElectraBackbone):
        # ELECTRA: generator MLM + replaced-token detection on single
        # sequences; `backbone` is the discriminator (RUN/backbone.keras).
        if tuple(objectives) != ("mlm",):
            raise UsageError(
                "ELECTRA trains replaced-token detection on single sequences: write the data "
                "with --objective none (and --no-masking for dynamic masks); this data has "
                f"the {objectives[-1]} objective.")

        return ElectraPretrainer(backbone,
                                 generator_fraction=published_generator_fraction(backbone))

    return BertPretrainer(backbone, objectives=objectives)


# --- --init-from ------------------------------------------------------------


def init_weights_from(source, pretrainer):
    """Loads weights from another run (RUN dir, RUN/checkpoints, a ckpt
    prefix or a .keras file) or a published checkpoint (hf://..., a
    directory): the whole pretrainer when its structure matches, else the
    backbone only (e.g. phase 2 with other heads). Returns what was loaded,
    in words."""
    found = (resolve(source) if handles.is_remote(source) or os.path.isdir(source)
             else None)
    if found is not None and found.is_published:
        return _init_from_published(source, found, pretrainer)
    keras_file = None
    if source.endswith(".keras") and os.path.isfile(source):
        keras_file = source
    elif os.path.isfile(runs.run_path(source, runs.PRETRAINER)):
        keras_file = runs.run_path(source, runs.PRETRAINER)
    if keras_file:
        return _init_from_keras_file(source, keras_file, pretrainer)
    folder = runs.run_path(source, runs.CHECKPOINTS)
    folder = folder if os.path.isdir(folder) else source
    prefixes = list_checkpoints(folder) if os.path.isdir(folder) else [source]
    if not prefixes or not tf.io.gfile.exists(prefixes[0] + ".index"):
        raise UsageError(f"--init-from {source}: no pretrainer.keras, .keras file or "
                         "checkpoint found there.")
    status = tf.train.Checkpoint(model=pretrainer).read(prefixes[0])
    status.expect_partial()
    return f"{prefixes[0]} (model weights)"


def _init_from_published(source, found, pretrainer):
    """The backbone from a published checkpoint (`found`, its Source), and
    its pretraining heads where a Hugging Face checkpoint has them."""
    published = load_backbone(found)
    try:
        pretrainer.backbone.set_weights(published.get_weights())
    except ValueError as err:
        raise UsageError(f"--init-from {source}: its {type(published).__name__} does not "
                         f"match --preset's architecture ({err}); --preset {source} builds "
                         "the architecture from it.") from None
    written = None
    if found.kind == HF and hasattr(pretrainer, "masked_lm_head"):
        heads = pretraining_heads_from_hf(found.path, found.model_type)
        written = heads and set_pretraining_heads(pretrainer, heads, source)
    elif found.kind == HF and hasattr(pretrainer, "rtd_head"):
        # ELECTRA: the discriminator's head; the generator starts fresh.
        head = discriminator_head_from_hf(found.path)
        written = head and set_discriminator_head(pretrainer, head, source)
    if not written:
        return f"{source} (backbone; the pretraining heads start fresh)"
    return f"{source} (backbone and the published {' and '.join(written)} heads)"


def _init_from_keras_file(source, keras_file, pretrainer):
    """The whole pretrainer from a .keras file of the same structure, else
    its backbone."""
    loaded = load_model(keras_file)
    source_backbone = getattr(loaded, "backbone", loaded)
    shapes = [w.shape for w in loaded.weights]
    if shapes == [w.shape for w in pretrainer.weights]:
        pretrainer.set_weights(loaded.get_weights())
        return f"{keras_file} (backbone and heads)"
    try:
        pretrainer.backbone.set_weights(source_backbone.get_weights())
    except ValueError as err:
        raise UsageError(f"--init-from {source}: its backbone does not match "
                         f"this one ({err}).") from None
    return f"{keras_file} (backbone only)"
