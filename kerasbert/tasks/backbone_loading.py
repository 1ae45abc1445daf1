"""Loading the backbone a command works on, in one place.

Everywhere a model is named (`--preset`, `--backbone`, `pretrain
--init-from`, `distill --teacher`, `Backbone.from_preset`, the tasks'
`from_preset`), the name is a handle:

    bert_base                     a built-in preset (architecture, random weights)
    hf://OWNER/NAME[@REVISION]    the Hugging Face Hub (cached by huggingface_hub)
    kaggle://OWNER/MODEL/keras/VARIANT[/VERSION]   Kaggle Models (kagglehub)
    DIR                           a Hugging Face model directory, a keras-hub
                                  preset, a google-research/bert checkpoint
                                  directory, a TF Hub encoder SavedModel, or a
                                  kerasbert run directory (pretrain/finetune)
    FILE.keras                    a saved backbone, pretrainer or task model

`load_backbone_from_handle` resolves one; `load_backbone` adds the CLI's
flag rules. Flags: `kerasbert.commands._args.add_backbone_arguments`.
"""

import os
import sys

from kerasbert import handles
from kerasbert import runs
from kerasbert.convert import sources
from kerasbert.errors import UsageError
from kerasbert.models import presets
from kerasbert.models.vocabulary_growth import grow_vocabulary
from kerasbert.saving import load_model

#: The models a run directory may hold, in the order they are preferred.
RUN_MODELS = (runs.BACKBONE, runs.MODEL, runs.PRETRAINER)


def describe_handles():
    return ("a built-in preset, hf://OWNER/NAME[@REVISION], kaggle://OWNER/MODEL/keras/VARIANT"
            f"[/VERSION], a .keras file, a kerasbert run directory, or {sources.describe_layouts()}")


def local_source(handle):
    """(local path, kind) of a handle that is not a preset name; kind is
    one of `sources`' layouts, "run" or "keras". Downloads hub handles."""
    handle = os.fspath(handle)
    if not handles.is_remote(handle) and not os.path.exists(handle) and os.sep not in handle:
        presets.get_preset(handle)  # an unknown name: the error lists the close ones
    path = handles.local_path(handle)
    if os.path.isfile(path):
        if path.endswith(".keras"):
            return path, "keras"
        raise UsageError(f"{handle}: a file that is not a .keras model; a handle is "
                         f"{describe_handles()}.")
    layout = sources.detect_layout(path)
    if layout is not None:
        return path, layout
    if any(os.path.isfile(os.path.join(path, name)) for name in RUN_MODELS):
        return path, "run"
    if handles.is_remote(handle) and not _has_weights(path):
        raise UsageError(f"{handle}: no config.json with safetensors weights. kerasbert never "
                         "unpickles, so repositories with only pytorch_model.bin are refused: "
                         "use a revision that has model.safetensors (the Hub's conversion bot "
                         "opens one as refs/pr/N: hf://OWNER/NAME@refs/pr/N), or convert it "
                         "yourself with the safetensors library.")
    raise UsageError(f"{handle}: not {describe_handles()}.")


def _has_weights(path):
    return any(name.endswith((".safetensors", ".h5")) for name in os.listdir(path))


def load_backbone_from_handle(handle, dtype=None, **overrides):
    """The backbone `handle` stands for (see the module docstring).

    Args:
        handle: a preset name, hub handle, directory or `.keras` file.
        dtype: a dtype policy ("mixed_float16", ...).
        **overrides: constructor arguments on top of the source's; on
            weights only those that keep the shapes (dropout, attention).

    Raises:
        UsageError: an unknown name, a missing or bad file, no network for
            a hub handle that is not cached, a family we do not have, an
            override that contradicts the weights.
    """
    if presets.is_preset(handle):
        backbone = presets.build_backbone(handle, overrides)
        return sources.apply_overrides(backbone, handle, dtype) if dtype else backbone
    path, kind = local_source(handle)
    if kind in ("keras", "run"):
        backbone = _saved_backbone(path, kind)
        return sources.apply_overrides(backbone, handle, dtype, overrides)
    return sources.load_published(path, kind, dtype=dtype, **overrides)


presets.register_source(load_backbone_from_handle)



def _saved_backbone(path, kind):
    if kind == "run":
        path = next(os.path.join(path, name) for name in RUN_MODELS
                    if os.path.isfile(os.path.join(path, name)))
    try:
        model = load_model(path)
    except UsageError as err:
        raise UsageError(f"{path}: {err}") from None
    if _has_encoder_outputs(model):
        return model
    inner = getattr(model, "backbone", None)
    if inner is None or not _has_encoder_outputs(inner):
        raise UsageError(f"{path} is a {type(model).__name__} without encoder_outputs "
                         "(expected a backbone, or a model with a .backbone).")
    return inner


def load_backbone(backbone=None, preset=None, init_checkpoint=None, bert_config=None,
                  vocabulary_size=None, added_tokens=0):
    """The backbone named by the CLI's flags.

    Args:
        backbone: `--backbone`, a saved `.keras` model or any handle.
        preset: `--preset`, a preset name or any handle.
        init_checkpoint: `--init-checkpoint`: with a preset name, a TF1
            checkpoint loaded into that architecture (the old form); alone,
            a google-research/bert directory, like `--preset DIR`.
        bert_config: `--bert-config`, the TF1 checkpoint's bert_config.json.
        vocabulary_size: the user's vocabulary size: a preset takes it, a
            checkpoint must agree with it.
        added_tokens: how many of those tokens the tokenizer appended to a
            published vocabulary (GPT-1's special tokens): a checkpoint
            with exactly that many fewer grows its embeddings
            (`grow_vocabulary`), as the GPT paper fine-tunes.

    Raises:
        UsageError: conflicting flags and everything `load_backbone_from_handle` raises.
    """
    loaded = _load_flags(backbone, preset, init_checkpoint, bert_config, vocabulary_size)
    if not vocabulary_size or loaded.vocabulary_size == vocabulary_size:
        return loaded
    if added_tokens and loaded.vocabulary_size == vocabulary_size - added_tokens:
        print(f"note: {added_tokens} token embeddings added after the checkpoint's "
              f"{loaded.vocabulary_size} (the tokenizer's special tokens it was published "
              "without); they train from random values.", file=sys.stderr)
        return grow_vocabulary(loaded, vocabulary_size)
    name = backbone or preset or init_checkpoint
    raise UsageError(f"vocabulary_size={vocabulary_size} (the tokenizer's) contradicts the "
                     f"weights' vocabulary_size={loaded.vocabulary_size} ({name}).")


def _load_flags(backbone, preset, init_checkpoint, bert_config, vocabulary_size):
    # A checkpoint's vocabulary is fixed: only a preset takes the size.
    overrides = ({"vocabulary_size": vocabulary_size}
                 if vocabulary_size and preset is not None and presets.is_preset(preset) else {})
    if backbone is not None:
        if preset is not None or init_checkpoint or bert_config:
            raise UsageError("--backbone names the model: drop --preset/--init-checkpoint/"
                             "--bert-config.")
        if not os.path.exists(backbone) and not handles.is_remote(backbone):
            raise UsageError(f"--backbone {backbone}: not found.")
        return _flag("--backbone", backbone, overrides)
    if preset is None and init_checkpoint:
        if bert_config:
            # A bare checkpoint prefix with its config file elsewhere.
            return _tf1_checkpoint(init_checkpoint, bert_config)
        return _flag("--init-checkpoint", init_checkpoint, overrides)
    if preset is None:
        raise UsageError("Give --preset NAME_OR_HANDLE (or --backbone PATH).")
    if not presets.is_preset(preset):
        if init_checkpoint or bert_config:
            raise UsageError(f"--preset {preset} is a handle to weights; --init-checkpoint/"
                             "--bert-config go with a preset name.")
        return _flag("--preset", preset, overrides)
    if init_checkpoint is None:
        if bert_config:
            raise UsageError("--bert-config needs --init-checkpoint.")
        print(f"warning: --preset {preset} is an architecture with RANDOM weights (give a "
              "published checkpoint: --preset hf://..., a directory, ...).", file=sys.stderr)
        return presets.build_backbone(preset, overrides)
    from kerasbert.convert.bert_config import kwargs_to_bert_config  # lazy: tensorflow

    return _tf1_checkpoint(init_checkpoint,
                           bert_config or kwargs_to_bert_config(
                               presets.build_backbone(preset, overrides)))


def _flag(flag, handle, overrides):
    try:
        return load_backbone_from_handle(handle, **overrides)
    except (UsageError, ValueError) as err:
        raise UsageError(f"{flag} {err}") from None


def _tf1_checkpoint(init_checkpoint, config):
    # lazy: tensorflow (the TF1 checkpoint reader; usage errors come first)
    from kerasbert.convert.tf1_checkpoint import load_bert_checkpoint

    try:
        return load_bert_checkpoint(init_checkpoint, config)
    except (ValueError, KeyError, FileNotFoundError) as err:
        raise UsageError(f"--init-checkpoint {init_checkpoint}: {err}") from None


def _has_encoder_outputs(model):
    try:
        output = model.output
    except (AttributeError, ValueError):
        return False
    return isinstance(output, dict) and "encoder_outputs" in output
