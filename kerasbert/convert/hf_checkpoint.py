"""`from_hf_directory(path)`: a local model directory in the Hugging Face
layout (`config.json` with `model_type`, safetensors weights) -> our backbone
of that family with its weights.

One table, `FAMILIES`, says per `model_type` which backbone, how its
config.json maps to our arguments and how its tensors map to the canonical
dict (`hf_layout.py`); the loading itself is the same for every family.
"""

import json
import os

from kerasbert.convert.albert_weights import set_albert_weights
from kerasbert.convert.bert_weights import set_bert_weights
from kerasbert.convert.hf_layout import Tensors
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
from kerasbert.convert.reformer_weights import lm_head_from_hf
from kerasbert.convert.reformer_weights import reformer_config_from_hf
from kerasbert.convert.reformer_weights import set_reformer_weights
from kerasbert.convert.roberta_weights import roberta_weights_from_hf
from kerasbert.convert.safetensors_files import CheckpointError
from kerasbert.convert.safetensors_files import read_checkpoint_directory
from kerasbert.models import AlbertBackbone
from kerasbert.models import BertBackbone
from kerasbert.models import BigBirdBackbone
from kerasbert.models import DistilBertBackbone
from kerasbert.models import ElectraBackbone
from kerasbert.models import GptBackbone
from kerasbert.models import ReformerBackbone
from kerasbert.models import RobertaBackbone
from kerasbert.layers.initializers import loads_checkpoint

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
}


def read_hf_config(directory):
    """The directory's config.json (a clear error if missing or bad)."""
    path = os.path.join(directory, CONFIG_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except FileNotFoundError:
        raise CheckpointError(f"{directory}: no {CONFIG_FILE} (not a Hugging Face model "
                              "directory).") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path}: not readable JSON ({err}).") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise CheckpointError(f"{path}: no \"model_type\" (not a Hugging Face config).")
    return config


@loads_checkpoint
def from_hf_directory(directory, dtype=None, **overrides):
    """Our backbone, with the checkpoint's weights, from a Hugging Face
    model directory (e.g. a `snapshot_download` of bert-base-uncased).

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
    family = FAMILIES.get(config["model_type"])
    if family is None:
        raise CheckpointError(f"{directory}: model_type {config['model_type']!r}; this loader "
                              f"reads {', '.join(sorted(FAMILIES))}.")
    cls, config_from_hf, weights_from_hf, set_weights = family
    kwargs = config_from_hf(config, directory)
    for key, value in overrides.items():
        if key in ("vocabulary_size", "num_layers", "num_heads", "hidden_dim",
                   "intermediate_dim", "max_sequence_length", "num_segments") \
                and key in kwargs and kwargs[key] != value:
            raise CheckpointError(f"{key}={value} contradicts the checkpoint's {key}="
                                  f"{kwargs[key]} ({directory}).")
    kwargs.update(overrides)
    tensors = Tensors(read_checkpoint_directory(directory), directory)
    backbone = cls(**kwargs, dtype=dtype)
    weights = weights_from_hf(tensors, kwargs)
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
