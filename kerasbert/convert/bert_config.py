"""`bert_config.json` <-> BertBackbone arguments.

The one place where the original config names (vocab_size, hidden_size,
num_hidden_layers, ...) are translated to ours (vocabulary_size, hidden_dim,
num_layers, ...).
"""

import os
import warnings

from kerasbert.convert.hf_config_fields import check_hf_config
from kerasbert.sources.source import NotJsonError
from kerasbert.sources.source import read_json_file

_ACT_FROM_CONFIG = {
    # HF and this project read "gelu" as the exact (erf) form. NOTE: the last
    # google-research/bert modeling.py computes its "gelu" with the tanh
    # formula; the two differ by < 1e-3 per activation.
    "gelu": "gelu",
    "gelu_new": "gelu_approximate",
    "gelu_approximate": "gelu_approximate",
    "relu": "relu",
}
# "gelu_new" is the name HF gives the tanh form, so configs we write load in
# HF as well as here.
_ACT_TO_CONFIG = {"gelu": "gelu", "gelu_approximate": "gelu_new", "relu": "relu"}

_REQUIRED_CONFIG = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
)


def _read_config(config_dict_or_json_path):
    """Returns (dict, description of where it came from); a file is read
    within the JSON limits of `kerasbert.sources.source.read_json_file`."""
    if isinstance(config_dict_or_json_path, dict):
        return dict(config_dict_or_json_path), "the bert config dict"
    path = os.fspath(config_dict_or_json_path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"BERT config file {path!r} not found.")
    try:
        config = read_json_file(path)
    except NotJsonError as error:
        raise ValueError(f"BERT config {path!r} is not valid JSON: {error}") from None
    if not isinstance(config, dict):
        raise ValueError(f"BERT config {path!r} must hold a JSON object.")
    return config, repr(path)


def bert_config_to_kwargs(config_dict_or_json_path):
    """Translates a `bert_config.json` (dict or path) to BertBackbone kwargs.

    Returns:
        dict with vocabulary_size, num_layers, num_heads, hidden_dim,
        intermediate_dim, max_sequence_length, num_segments, dropout,
        embedding_dim (None unless `embedding_size` differs from
        hidden_size), activation, initializer_range and, if the config has
        `layer_norm_eps`, layer_norm_epsilon.

    Raises:
        FileNotFoundError / ValueError naming the file and the field: missing
        required field, unknown `hidden_act`, hidden_size not divisible by
        num_attention_heads.
    """
    config, where = _read_config(config_dict_or_json_path)
    missing = [k for k in _REQUIRED_CONFIG if k not in config]
    if missing:
        raise ValueError(f"BERT config {where} lacks required field(s) {missing}.")
    check_hf_config(config, f"BERT config {where}")  # types and ranges, field by field
    act = config.get("hidden_act", "gelu")
    if not isinstance(act, str) or act not in _ACT_FROM_CONFIG:
        raise ValueError(
            f"BERT config {where}: unsupported hidden_act {act!r}; supported: "
            f"{sorted(_ACT_FROM_CONFIG)}."
        )
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    # BertBackbone has one dropout rate for hidden states and attention.
    dropout = float(config.get("hidden_dropout_prob", 0.1))
    attention_dropout = float(config.get("attention_probs_dropout_prob", dropout))
    if attention_dropout != dropout:
        warnings.warn(
            f"BERT config {where}: hidden_dropout_prob={dropout} and "
            f"attention_probs_dropout_prob={attention_dropout} differ; "
            f"BertBackbone uses {dropout} for both.",
            stacklevel=2,
        )
    embedding_size = config.get("embedding_size")
    kwargs = {
        "vocabulary_size": int(config["vocab_size"]),
        "num_layers": int(config["num_hidden_layers"]),
        "num_heads": heads,
        "hidden_dim": hidden,
        "intermediate_dim": int(config["intermediate_size"]),
        # Defaults are the original BertConfig's.
        "max_sequence_length": int(config.get("max_position_embeddings", 512)),
        "num_segments": int(config.get("type_vocab_size", 16)),
        "dropout": dropout,
        "embedding_dim": (
            int(embedding_size)
            if embedding_size is not None and int(embedding_size) != hidden
            else None
        ),
        "activation": _ACT_FROM_CONFIG[act],
        "initializer_range": float(config.get("initializer_range", 0.02)),
    }
    if "layer_norm_eps" in config:  # HF's name; the original fixes 1e-12.
        kwargs["layer_norm_epsilon"] = float(config["layer_norm_eps"])
    _check_buildable(kwargs, where)
    return kwargs


# Our argument -> the bert_config.json field it comes from (for messages).
_FIELD_OF = {
    "vocabulary_size": "vocab_size", "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads", "hidden_dim": "hidden_size",
    "intermediate_dim": "intermediate_size", "max_sequence_length": "max_position_embeddings",
    "num_segments": "type_vocab_size", "dropout": "hidden_dropout_prob",
    "embedding_dim": "embedding_size", "layer_norm_epsilon": "layer_norm_eps",
}


def _check_buildable(kwargs, where):
    """`validate_config` on translated kwargs; the ConfigError names the
    file and its own field names (num_attention_heads, not num_heads)."""
    from kerasbert.models.config_checks import ConfigError, validate_config  # lazy: keras

    try:
        validate_config(kwargs)
    except ConfigError as err:
        message = str(err)
        for ours, theirs in _FIELD_OF.items():
            message = message.replace(f"{ours}=", f"{theirs}=")
        raise ConfigError(f"BERT config {where}: {message}") from None


def kwargs_to_bert_config(backbone):
    """Translates a BertBackbone (or its config dict) to `bert_config.json`.

    Raises:
        ValueError: an activation `bert_config.json` cannot name.
    """
    c = backbone if isinstance(backbone, dict) else backbone.get_config()
    act = c.get("activation", "gelu")
    if act not in _ACT_TO_CONFIG:
        raise ValueError(
            f"Activation {act!r} has no bert_config.json hidden_act; "
            f"supported: {sorted(_ACT_TO_CONFIG)}."
        )
    config = {
        "attention_probs_dropout_prob": c.get("dropout", 0.1),
        "hidden_act": _ACT_TO_CONFIG[act],
        "hidden_dropout_prob": c.get("dropout", 0.1),
        "hidden_size": c["hidden_dim"],
        "initializer_range": c.get("initializer_range", 0.02),
        "intermediate_size": c["intermediate_dim"],
        "max_position_embeddings": c.get("max_sequence_length", 512),
        "num_attention_heads": c["num_heads"],
        "num_hidden_layers": c["num_layers"],
        "type_vocab_size": c.get("num_segments", 2),
        "vocab_size": c["vocabulary_size"],
    }
    if c.get("embedding_dim") not in (None, c["hidden_dim"]):
        config["embedding_size"] = c["embedding_dim"]
    if c.get("layer_norm_epsilon", 1e-12) != 1e-12:
        config["layer_norm_eps"] = c["layer_norm_epsilon"]
    return config
