"""Published weights from a local directory, whatever its layout.

    layout      what marks it                               loader
    hf          config.json with "model_type"               hf_checkpoint.from_hf_directory
    keras_hub   config.json with "registered_name"          keras_hub_preset.from_keras_hub_preset
                (model.weights.h5, tokenizer.json, assets/)
    tf1         bert_config.json + a TF1 checkpoint          tf1_checkpoint.load_bert_checkpoint
                (bert_model.ckpt.*)
    tf_hub      saved_model.pb (a TF Hub BERT encoder)      tf_hub_encoder.from_tf_hub_encoder

`detect_layout` reads the markers, `load_published` builds our backbone of
the source's family with its weights. Run directories and `.keras` files
are ours and load through `kerasbert.tasks.backbone_loading`, which also
turns hub handles into directories (`kerasbert.handles`).
"""

import os

from kerasbert.convert.keras_hub import FAMILIES
from kerasbert.convert.keras_hub_preset import from_keras_hub_preset
from kerasbert.errors import UsageError
from kerasbert.io_utils import json_or_none
from kerasbert.layers.initializers import loads_checkpoint

HF = "hf"
KERAS_HUB = "keras_hub"
TF1 = "tf1"
TF_HUB = "tf_hub"

TF1_CONFIG = "bert_config.json"

#: Arguments that fix the shapes of the weights: an override of one of them
#: that differs from the source is an error, never a silent rebuild.
SHAPE_ARGUMENTS = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim",
                   "max_sequence_length", "num_segments", "embedding_dim", "num_groups",
                   "num_inner_repetitions")


def detect_layout(path):
    """The layout of a local directory (`HF`, `KERAS_HUB`, `TF1`, `TF_HUB`),
    or None when it is none of them."""
    if not os.path.isdir(path):
        return None
    config = json_or_none(os.path.join(path, "config.json"))
    if isinstance(config, dict) and "model_type" in config:
        return HF
    if isinstance(config, dict) and "registered_name" in config:
        return KERAS_HUB
    if os.path.isfile(os.path.join(path, TF1_CONFIG)):
        return TF1
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return TF_HUB
    return None


def hf_model_type(path):
    return (json_or_none(os.path.join(path, "config.json")) or {}).get("model_type")


def describe_layouts():
    return ("a Hugging Face model directory (config.json with model_type + safetensors), a "
            "keras-hub preset directory (config.json + model.weights.h5), a google-research/bert "
            "directory (bert_config.json + bert_model.ckpt.*) or a TF Hub BERT encoder SavedModel")


def load_published(path, layout, dtype=None, **overrides):
    """Our backbone with the weights of the `layout` directory at `path`.

    Args:
        path: the local directory (`kerasbert.handles.local_path` of a handle).
        layout: `detect_layout(path)`.
        dtype: a dtype policy for the backbone.
        **overrides: constructor arguments applied on top of the source's
            configuration (dropout, attention); one that contradicts the
            weights' shapes is an error naming both values.

    Raises:
        UsageError: missing or bad files, a family we do not have, a
            contradicting override.
    """
    if layout == HF:
        from kerasbert.convert.hf_checkpoint import from_hf_directory  # lazy: keras

        return from_hf_directory(path, dtype=dtype, **overrides)
    if layout == KERAS_HUB:
        backbone = _from_keras_hub_preset(path)
    elif layout == TF1:
        from kerasbert.convert.tf1_checkpoint import load_bert_checkpoint  # lazy: tensorflow

        try:
            backbone = load_bert_checkpoint(path, os.path.join(path, TF1_CONFIG))
        except (ValueError, KeyError, FileNotFoundError) as err:
            raise UsageError(f"{path}: {err}") from None
    elif layout == TF_HUB:
        from kerasbert.convert.tf_hub_encoder import from_tf_hub_encoder  # lazy: tensorflow

        backbone = from_tf_hub_encoder(path)
    else:
        raise UsageError(f"{path}: not {describe_layouts()}.")
    return apply_overrides(backbone, path, dtype, overrides)


def _from_keras_hub_preset(path):
    config = json_or_none(os.path.join(path, "config.json"))
    name = config.get("registered_name", "").split(">")[-1]
    if name not in FAMILIES:
        raise UsageError(f"{path}: a keras-hub {name or 'model'}; this loader reads "
                         f"{', '.join(sorted(FAMILIES))}.")
    if not os.path.isfile(os.path.join(path, "model.weights.h5")):
        raise UsageError(f"{path}: no model.weights.h5 (keras-hub preset without weights).")
    return from_keras_hub_preset(path)


@loads_checkpoint
def apply_overrides(backbone, source, dtype=None, overrides=None):
    """`backbone` rebuilt with `overrides` and `dtype` and the same weights
    (returned as is when there are none).

    Raises:
        UsageError: an override of a shape argument (`SHAPE_ARGUMENTS`) that
            differs from the source, or one the family does not take.
    """
    config = backbone.get_config()
    # Values the source already has change nothing (e.g. the vocabulary
    # size of a matching tokenizer).
    overrides = {k: v for k, v in (overrides or {}).items() if config.get(k, object()) != v}
    if not overrides and dtype is None:
        return backbone
    for key, value in overrides.items():
        if key in SHAPE_ARGUMENTS and key in config and config[key] != value:
            raise UsageError(f"{key}={value} contradicts the weights' {key}={config[key]} "
                             f"({source}).")
    unknown = sorted(set(overrides) - set(type(backbone).config_names()))
    if unknown:
        raise UsageError(f"{', '.join(unknown)}: not arguments of {type(backbone).__name__}.")
    config.update(overrides)
    if dtype is not None:
        config["dtype"] = dtype
    rebuilt = type(backbone).from_config(config)
    rebuilt.set_weights(backbone.get_weights())
    return rebuilt
