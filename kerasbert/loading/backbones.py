"""The backbone a handle stands for, in one place.

Everywhere a model is named (`--preset`, `--backbone`, `pretrain
--init-from`, `distill --teacher`, `Backbone.from_preset`, the tasks'
`from_preset`), the name is a handle (`kerasbert.sources.source`):

    bert_base                     a built-in preset (architecture, random weights)
    hf://OWNER/NAME[@REVISION]    the Hugging Face Hub (cached by huggingface_hub)
    kaggle://OWNER/MODEL/keras/VARIANT[/VERSION]   Kaggle Models (kagglehub)
    DIR                           a Hugging Face model directory, a keras-hub
                                  preset, a google-research/bert checkpoint
                                  directory, a TF Hub encoder SavedModel, or a
                                  kerasbert run directory (pretrain/finetune)
    FILE.keras                    a saved backbone, pretrainer or task model

`load_backbone` resolves one (the package root installs it as the door
`Backbone.from_preset` uses); `load_backbone_from_flags` adds the CLI's flag
rules. Flags: `kerasbert.commands._args.add_backbone_arguments`.
"""

import os
import sys
import zipfile

from kerasbert import runs
from kerasbert.convert.bert_config import kwargs_to_bert_config
from kerasbert.convert.tf1_checkpoint import load_bert_checkpoint
from kerasbert.errors import CheckpointError
from kerasbert.errors import UsageError
from kerasbert.sources import handles
from kerasbert.sources import source as source_module
from kerasbert.loading.published import apply_overrides
from kerasbert.loading.published import load_published
from kerasbert.models import presets
from kerasbert.models.backbone import Backbone
from kerasbert.models.config_checks import check_stored_parameters
from kerasbert.models.config_checks import stored_config_arguments
from kerasbert.models.vocabulary_growth import grow_vocabulary
from kerasbert.saving import load_model

#: The models a run directory may hold, in the order they are preferred.
RUN_MODELS = (runs.BACKBONE, runs.MODEL, runs.PRETRAINER)


def backbone_source(handle):
    """`source.resolve` with the preset registry, checked for a backbone:
    an unknown bare name is an error listing the close preset names (not a
    missing file), and a directory must be a published layout or hold a
    kerasbert model."""
    found = source_module.resolve(handle, presets)
    if found.is_run and not _run_model(found.path):
        if found.is_remote and not _has_weights(found.path):
            raise UsageError(f"{found.handle}: no config.json with safetensors weights. kerasbert "
                             "never unpickles, so repositories with only pytorch_model.bin are "
                             "refused: use a revision that has model.safetensors (the Hub's "
                             "conversion bot opens one as refs/pr/N: hf://OWNER/NAME@refs/pr/N), "
                             "or convert it yourself with the safetensors library.")
        raise UsageError(f"{found.handle}: not {source_module.describe_handles()}.")
    return found


def _run_model(directory):
    """The model file a run directory holds, preferred first, or None."""
    return next((os.path.join(directory, name) for name in RUN_MODELS
                 if os.path.isfile(os.path.join(directory, name))), None)


def _has_weights(path):
    return any(name.endswith((".safetensors", ".h5")) for name in os.listdir(path))


def load_backbone(handle, dtype=None, **overrides):
    """The backbone `handle` stands for (see the module docstring).

    Args:
        handle: a preset name, hub handle, directory, `.keras` file or a
            resolved `Source`.
        dtype: a dtype policy ("mixed_float16", ...).
        **overrides: constructor arguments on top of the source's; on
            weights only those that keep the shapes (dropout, attention).

    Raises:
        UsageError: an unknown name, a missing or bad file, no network for
            a hub handle that is not cached, a family we do not have, an
            override that contradicts the weights.
    """
    found = backbone_source(handle)
    if found.is_preset:
        backbone = presets.build_backbone(found.handle, overrides)
        return apply_overrides(backbone, found.handle, dtype) if dtype else backbone
    if found.is_published:
        return load_published(found, dtype=dtype, **overrides)
    backbone = _saved_backbone(found)
    return apply_overrides(backbone, found.handle, dtype, overrides)


def _saved_backbone(found):
    path = _run_model(found.path) if found.is_run else found.path
    check_keras_archive(path)
    try:
        model = load_model(path)
    except UsageError as err:
        raise UsageError(f"{path}: {err}") from None
    # A backbone of ours is one whatever its outputs (an encoder-decoder
    # TransformerBackbone has no encoder_outputs).
    if _has_encoder_outputs(model) or isinstance(model, Backbone):
        return model
    inner = getattr(model, "backbone", None)
    if inner is None or not (_has_encoder_outputs(inner) or isinstance(inner, Backbone)):
        raise UsageError(f"{path} is a {type(model).__name__} without encoder_outputs "
                         "(expected a backbone, or a model with a .backbone).")
    return inner


def _backbone_classes():
    """{registered name: class} of every backbone family ("kerasbert>BertBackbone")."""
    found, todo = {}, [Backbone]
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        found[f"kerasbert>{cls.__name__}"] = cls
    return found


def _backbone_configs(node, classes):
    """(class, constructor arguments) of every backbone serialized in a
    .keras file's config (a pretrainer holds one, ELECTRA's two); the JSON
    is at most `MAX_JSON_DEPTH` deep, so is this recursion."""
    if isinstance(node, dict):
        cls = classes.get(node.get("registered_name"))
        if cls is not None and cls is not Backbone and isinstance(node.get("config"), dict):
            yield cls, node["config"]
        for value in node.values():
            yield from _backbone_configs(value, classes)
    elif isinstance(node, list):
        for value in node:
            yield from _backbone_configs(value, classes)


def check_keras_archive(path):
    """A .keras file nobody vouches for, checked before Keras builds
    anything from it: its config.json within the JSON limits (size read
    from the archive's directory, then depth), every backbone's arguments
    values a model can have, and their parameters stored in
    model.weights.h5 (at 2 bytes or more each) and within the memory budget.

    Raises:
        UsageError: naming the file and the value.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            members = {info.filename: info for info in archive.infolist()}
            config_info = members.get("config.json")
            if config_info is None:
                raise UsageError(f"{path}: no config.json inside (not a Keras 3 .keras file).")
            if config_info.file_size > source_module.MAX_JSON_BYTES:
                raise CheckpointError(f"{path}: a config.json of {config_info.file_size:,} "
                                      "bytes; a model config is a few kilobytes.")
            with archive.open(config_info) as f:
                raw = f.read(source_module.MAX_JSON_BYTES + 1)
    except (zipfile.BadZipFile, EOFError, OSError, RuntimeError) as err:
        raise UsageError(f"{path}: not a readable .keras file ({err}).") from None
    config = source_module.parse_json(raw, f"{path} (config.json)")
    weights = members.get("model.weights.h5")
    stored_bytes = weights.file_size if weights is not None else 0
    for cls, arguments in _backbone_configs(config, _backbone_classes()):
        arguments = stored_config_arguments(cls, arguments, f"{path}: {cls.__name__} ")
        if arguments is None:
            continue  # Keras refuses it when it builds it
        # Float16 is the narrowest dtype a weight is stored in.
        check_stored_parameters(cls, arguments, stored_bytes // 2, f"{path}: ",
                                f"model.weights.h5's {stored_bytes:,} bytes hold at most")


def load_backbone_from_flags(backbone=None, preset=None, init_checkpoint=None, bert_config=None,
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
        UsageError: conflicting flags and everything `load_backbone` raises.
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
    return _tf1_checkpoint(init_checkpoint,
                           bert_config or kwargs_to_bert_config(
                               presets.build_backbone(preset, overrides)))


def _flag(flag, handle, overrides):
    try:
        return load_backbone(handle, **overrides)
    except (UsageError, ValueError) as err:
        raise UsageError(f"{flag} {err}") from None


def _tf1_checkpoint(init_checkpoint, config):
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
