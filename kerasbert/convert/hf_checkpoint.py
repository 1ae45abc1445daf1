"""`from_hf_directory(path)`: a local model directory in the Hugging Face
layout (`config.json` with `model_type`, safetensors weights) -> our backbone
of that family with its weights.

One table, `FAMILIES`, says per `model_type` which backbone, how its
config.json maps to our arguments and how its tensors map to the canonical
dict (`hf_layout.py`); the loading itself is the same for every family.
"""

import os
import re

from kerasbert.convert.albert_weights import set_albert_weights
from kerasbert.convert.bert_weights import set_bert_weights
from kerasbert.convert.hf_layout import Tensors
from kerasbert.convert.hf_layout import check_canonical_shapes
from kerasbert.convert.hf_config_fields import check_hf_config
from kerasbert.convert.hf_config_fields import hf_names
from kerasbert.convert.hf_layout import shape_mismatch
from kerasbert.convert.hf_layout import albert_config_from_hf
from kerasbert.convert.hf_layout import albert_weights_from_hf
from kerasbert.convert.hf_layout import activation_from_hf
from kerasbert.convert.hf_layout import bert_config_from_hf
from kerasbert.convert.hf_layout import big_bird_config_from_hf
from kerasbert.convert.hf_layout import bert_weights_from_hf
from kerasbert.convert.hf_layout import distilbert_config_from_hf
from kerasbert.convert.hf_layout import electra_config_from_hf
from kerasbert.convert.hf_layout import electra_weights_from_hf
from kerasbert.convert.hf_layout import distilbert_weights_from_hf
from kerasbert.convert.hf_layout import gpt_config_from_hf
from kerasbert.convert.hf_layout import gpt_weights_from_hf
from kerasbert.convert import modernbert_weights
from kerasbert.convert.reformer_weights import lm_head_from_hf
from kerasbert.convert.reformer_weights import reformer_config_from_hf
from kerasbert.convert.reformer_weights import expected_shapes as reformer_expected_shapes
from kerasbert.convert.reformer_weights import set_reformer_weights
from kerasbert.convert.reformer_weights import stored_layers
from kerasbert.convert.roberta_weights import roberta_weights_from_hf
from kerasbert.convert.safetensors_files import CheckpointError
from kerasbert.convert.safetensors_files import INDEX_FILE
from kerasbert.convert.safetensors_files import SINGLE_FILE
from kerasbert.convert.safetensors_files import read_checkpoint_directory
from kerasbert.sources.source import read_json_file
from kerasbert.models import AlbertBackbone
from kerasbert.models import BertBackbone
from kerasbert.models import BigBirdBackbone
from kerasbert.models import DistilBertBackbone
from kerasbert.models import ElectraBackbone
from kerasbert.models import GptBackbone
from kerasbert.models import ModernBertBackbone
from kerasbert.models import ReformerBackbone
from kerasbert.models import RobertaBackbone
from kerasbert.layers.initializers import loads_checkpoint
from kerasbert.models.config_checks import ConfigError
from kerasbert.models.config_checks import check_stored_parameters
from kerasbert.models.config_checks import validate_config

CONFIG_FILE = "config.json"


def _roberta_config(config, source):
    # fairseq's position table has two offset rows (padding_idx + 1).
    kwargs = bert_config_from_hf(config, source)
    kwargs["max_sequence_length"] -= 2
    kwargs.pop("num_segments")
    kwargs.pop("activation")
    if activation_from_hf(config, source) != RobertaBackbone.activation:
        raise CheckpointError(f"{source}: hidden_act {config.get('hidden_act')!r}; "
                              "RoBERTa's encoder uses the erf GELU.")
    kwargs["layer_norm_epsilon"] = float(config.get("layer_norm_eps", 1e-5))
    return kwargs


def _roberta_weights(tensors, kwargs):
    return roberta_weights_from_hf(tensors.tensors, kwargs["max_sequence_length"])


def _albert_weights(tensors, kwargs):
    return albert_weights_from_hf(tensors, kwargs["num_groups"], kwargs["num_inner_repetitions"])


def _bert_weights(tensors, kwargs):
    return bert_weights_from_hf(tensors)


#: model_type -> (backbone class, config.json -> arguments, Tensors ->
#: canonical dict, canonical dict -> backbone)
FAMILIES = {
    "bert": (BertBackbone, bert_config_from_hf, _bert_weights, set_bert_weights),
    "roberta": (RobertaBackbone, _roberta_config, _roberta_weights, set_bert_weights),
    "distilbert": (DistilBertBackbone, distilbert_config_from_hf,
                   lambda tensors, kwargs: distilbert_weights_from_hf(tensors), set_bert_weights),
    "albert": (AlbertBackbone, albert_config_from_hf, _albert_weights, set_albert_weights),
    "electra": (ElectraBackbone, electra_config_from_hf,
                lambda tensors, kwargs: electra_weights_from_hf(tensors), set_bert_weights),
    "big_bird": (BigBirdBackbone, big_bird_config_from_hf, _bert_weights, set_bert_weights),
    "openai-gpt": (GptBackbone, gpt_config_from_hf,
                   lambda tensors, kwargs: gpt_weights_from_hf(tensors), set_bert_weights),
    # The Reformer maps checkpoint names to variables itself (reformer_weights).
    "reformer": (ReformerBackbone, reformer_config_from_hf, lambda tensors, kwargs: tensors,
                 set_reformer_weights),
    # So does ModernBERT (modernbert_weights.tensor_table).
    "modernbert": (ModernBertBackbone, modernbert_weights.modernbert_config_from_hf,
                   lambda tensors, kwargs: tensors, modernbert_weights.set_modernbert_weights),
}

#: The families that map checkpoint names to variables themselves: (the
#: layers a checkpoint holds, {name: (shape, fields)} of a config) per class,
#: checked before anything is built (the others: `check_canonical_shapes`).
NAMED_SHAPES = {
    ReformerBackbone: (stored_layers, reformer_expected_shapes),
    ModernBertBackbone: (modernbert_weights.stored_layers, modernbert_weights.expected_shapes),
}


def read_hf_config(directory):
    """The directory's config.json (a clear error if missing, bad, or past
    the JSON limits of `kerasbert.sources.source.read_json_file`)."""
    path = os.path.join(directory, CONFIG_FILE)
    try:
        config = read_json_file(path)
    except FileNotFoundError:
        raise CheckpointError(f"{directory}: no {CONFIG_FILE} (not a Hugging Face model "
                              "directory).") from None
    except OSError as err:
        raise CheckpointError(f"{path}: not readable ({err.strerror}).") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise CheckpointError(f"{path}: no \"model_type\" (not a Hugging Face config).")
    return config


def _weights_file(directory):
    return (SINGLE_FILE if os.path.isfile(os.path.join(directory, SINGLE_FILE))
            else f"the shards of {INDEX_FILE}")


def _translated(err, names):
    """A ConfigError's message with our argument names replaced by the
    config.json fields they come from."""
    return re.sub(r"\b([a-z_]+)=", lambda m: f"{names.get(m[1], m[1])}=", str(err))


def _arguments(config, directory):
    """config.json -> the family's constructor arguments, every field
    checked for type and range first (`check_hf_config`), then the values
    together (`validate_config` with the family's rules). Nothing is read
    from the weights and nothing is built."""
    model_type = config["model_type"]
    family = FAMILIES.get(model_type) if isinstance(model_type, str) else None
    if family is None:
        raise CheckpointError(f"{directory}: model_type {model_type!r}; this loader "
                              f"reads {', '.join(sorted(FAMILIES))}.")
    cls, config_from_hf = family[:2]
    check_hf_config(config, os.path.join(directory, CONFIG_FILE))
    try:
        kwargs = config_from_hf(config, directory)
    except CheckpointError:
        raise
    except (TypeError, ValueError, KeyError, IndexError) as err:
        raise CheckpointError(f"{directory}/{CONFIG_FILE}: {err}") from None
    try:
        validate_config(kwargs, cls)
    except ConfigError as err:
        raise CheckpointError(f"{directory}/{CONFIG_FILE}: "
                              f"{_translated(err, hf_names(model_type))}") from None
    return cls, kwargs


def _check_named_shapes(cls, tensors, kwargs, names, directory):
    """The layer count and every tensor's shape of a `NAMED_SHAPES` family
    against its config.json, naming the fields, the tensor and both shapes."""
    count_layers, shapes = NAMED_SHAPES[cls]
    layers = count_layers(tensors)
    if layers != kwargs["num_layers"]:
        raise CheckpointError(f"{directory}: config.json says "
                              f"{names.get('num_layers', 'num_layers')}={kwargs['num_layers']}; "
                              f"{_weights_file(directory)} holds {layers} layers.")
    for name, (shape, fields) in shapes(kwargs).items():
        if tensors.has(name) and tuple(tensors.get(name).shape) != tuple(shape):
            raise shape_mismatch(directory, _weights_file(directory), names, kwargs,
                                 tensors.prefix + name, shape, fields, tensors.get(name).shape)


@loads_checkpoint
def from_hf_directory(directory, dtype=None, **overrides):
    """Our backbone, with the checkpoint's weights, from a Hugging Face
    model directory (e.g. a `snapshot_download` of bert-base-uncased).

    Nothing in the directory is trusted: before any model is built,
    config.json is parsed within limits and every architecture value is
    checked (type, range, the family's rules), the safetensors headers are
    checked (`safetensors_files`), the parameters the config declares must
    be stored in the weight files and fit the memory budget, and every
    tensor's shape must be the one the config gives it. Each refusal is
    one `CheckpointError` naming the file, the field and the values.

    Args:
        directory: holds config.json and model.safetensors (or a sharded
            model.safetensors.index.json).
        dtype: a dtype policy for the backbone.
        **overrides: constructor arguments that do not change the weights'
            shapes (dropout, attention); one that contradicts the checkpoint
            (e.g. hidden_dim) is an error naming both values.

    Returns:
        the backbone of `model_type`'s family (`FAMILIES`).
    """
    directory = os.fspath(directory)
    config = read_hf_config(directory)
    cls, kwargs = _arguments(config, directory)
    _, _, weights_from_hf, set_weights = FAMILIES[config["model_type"]]
    names = hf_names(config["model_type"])
    for key, value in overrides.items():
        if key in ("vocabulary_size", "num_layers", "num_heads", "hidden_dim",
                   "intermediate_dim", "max_sequence_length", "num_segments") \
                and key in kwargs and kwargs[key] != value:
            raise CheckpointError(f"{key}={value} contradicts the checkpoint's {key}="
                                  f"{kwargs[key]} ({directory}).")
    kwargs.update(overrides)
    validate_config(kwargs, cls)  # the overrides, with the family's rules
    stored = read_checkpoint_directory(directory)
    check_stored_parameters(cls, kwargs, sum(tensor.size for tensor in stored.values()),
                            f"{directory}/config.json: ", f"{_weights_file(directory)} stores",
                            names)
    tensors = Tensors(stored, directory)
    if cls in NAMED_SHAPES:
        _check_named_shapes(cls, tensors, kwargs, names, directory)
    try:
        weights = weights_from_hf(tensors, kwargs)
    except CheckpointError:
        raise
    except ValueError as err:  # e.g. a fused GPT projection that does not split in three
        raise CheckpointError(f"{directory}: {err}") from None
    if cls not in NAMED_SHAPES:
        check_canonical_shapes(weights, kwargs, names, directory, _weights_file(directory))
    backbone = cls(**kwargs, dtype=dtype)
    if not backbone.tied_lm_head:
        # An untied LM head lives in CausalLM, which takes it from here
        # (not a tracked weight of the backbone).
        object.__setattr__(backbone, "published_lm_head", lm_head_from_hf(tensors.tensors))
    if getattr(backbone, "pooler", None) is not None and "pooler_kernel" not in weights:
        # A masked-LM checkpoint has no pooler: ours keeps its initial
        # weights (fine-tuning trains it, as for ELECTRA).
        weights["pooler_kernel"] = backbone.pooler.dense.kernel.numpy()
        weights["pooler_bias"] = backbone.pooler.dense.bias.numpy()
    try:
        return set_weights(backbone, weights)
    except ValueError as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(f"{directory}: {err}") from None
