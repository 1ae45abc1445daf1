"""Our backbone from published weights in a peer's layout.

    kind        loader
    hf          kerasbert.convert.hf_checkpoint.from_hf_directory
    keras_hub   kerasbert.convert.keras_hub_preset.from_keras_hub_preset
    tf1         kerasbert.convert.tf1_checkpoint.load_bert_checkpoint
    tf_hub      kerasbert.convert.tf_hub_encoder.from_tf_hub_encoder
    elmo        kerasbert.convert.elmo_weights.load_elmo

The kind comes from the resolved `Source` (`kerasbert.sources.source`);
run directories and `.keras` files are ours and load in
`kerasbert.loading.backbones`.
"""

import os

from kerasbert.convert.elmo_weights import load_elmo
from kerasbert.convert.hf_checkpoint import from_hf_directory
from kerasbert.convert.keras_hub import FAMILIES
from kerasbert.convert.keras_hub_preset import from_keras_hub_preset
from kerasbert.convert.tf1_checkpoint import load_bert_checkpoint
from kerasbert.convert.tf_hub_encoder import from_tf_hub_encoder
from kerasbert.errors import UsageError
from kerasbert.layers.initializers import loads_checkpoint
from kerasbert.sources.source import ELMO
from kerasbert.sources.source import HF
from kerasbert.sources.source import KERAS_HUB
from kerasbert.sources.source import TF1
from kerasbert.sources.source import TF1_CONFIG
from kerasbert.sources.source import TF_HUB
from kerasbert.sources.source import describe_layouts
from kerasbert.models.config_checks import validate_config

#: Arguments that fix the shapes of the weights: an override of one of them
#: that differs from the source is an error, never a silent rebuild.
SHAPE_ARGUMENTS = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim",
                   "max_sequence_length", "num_segments", "embedding_dim", "num_groups",
                   "num_inner_repetitions")


def load_published(source, dtype=None, **overrides):
    """Our backbone with the weights of a published source.

    Args:
        source: a resolved `Source` whose kind is one of `PUBLISHED`.
        dtype: a dtype policy for the backbone.
        **overrides: constructor arguments applied on top of the source's
            configuration (dropout, attention); one that contradicts the
            weights' shapes is an error naming both values.

    Raises:
        UsageError: missing or bad files, a family we do not have, a
            contradicting override.
    """
    if source.kind in _BUILDS_WITH_OVERRIDES:
        return _BUILDS_WITH_OVERRIDES[source.kind](source.path, dtype=dtype, **overrides)
    if source.kind not in _READERS:
        raise UsageError(f"{source.handle}: not {describe_layouts()}.")
    backbone = _READERS[source.kind](source)
    return apply_overrides(backbone, source.path, dtype, overrides)


def _from_tf1_checkpoint(source):
    try:
        return load_bert_checkpoint(source.path, source.file(TF1_CONFIG))
    except (ValueError, KeyError, FileNotFoundError) as err:
        raise UsageError(f"{source.path}: {err}") from None


def _from_keras_hub_preset(source):
    path = source.path
    registered = source.config.get("registered_name")
    name = registered.split(">")[-1] if isinstance(registered, str) else ""
    if name not in FAMILIES:
        raise UsageError(f"{path}: a keras-hub {name or 'model'}; this loader reads "
                         f"{', '.join(sorted(FAMILIES))}.")
    if not os.path.isfile(os.path.join(path, "model.weights.h5")):
        raise UsageError(f"{path}: no model.weights.h5 (keras-hub preset without weights).")
    return from_keras_hub_preset(path)


#: Readers by source kind: those that build with the overrides and dtype
#: themselves, and those whose backbone `apply_overrides` rebuilds.
_BUILDS_WITH_OVERRIDES = {HF: from_hf_directory, ELMO: load_elmo}
_READERS = {KERAS_HUB: _from_keras_hub_preset, TF1: _from_tf1_checkpoint,
            TF_HUB: lambda source: from_tf_hub_encoder(source.path)}


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
    # The same checks as a preset's --set values, the family's rules included.
    validate_config(config, type(backbone))
    if dtype is not None:
        config["dtype"] = dtype
    rebuilt = type(backbone).from_config(config)
    rebuilt.set_weights(backbone.get_weights())
    return rebuilt
