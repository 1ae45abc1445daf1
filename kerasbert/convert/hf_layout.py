"""Hugging Face `transformers` encoder checkpoints, as tables.

A model directory in the Hugging Face layout holds `config.json` (with
`model_type`) and safetensors weights (`safetensors_files.py`). Names follow
the torch modules: BERT, RoBERTa and ELECTRA share one encoder-layer layout
(`LAYER`, `LAYER_NORMS`, under "encoder.layer.{i}."), a family adds its
embeddings and pooler (`BERT_TOP`), and task checkpoints put the encoder
under a prefix ("bert.", "roberta.", ...). torch `Linear` weights are
[out, in]; the canonical dict (`bert_weights.py`) keeps kernels [in, out].
Older checkpoints name LayerNorm parameters gamma/beta instead of
weight/bias; both are read.
"""

import numpy as np

from kerasbert.convert.safetensors_files import CheckpointError

#: canonical layer-key prefix -> torch Linear module under "encoder.layer.{i}."
LAYER = {
    "query": "attention.self.query",
    "key": "attention.self.key",
    "value": "attention.self.value",
    "attention_output": "attention.output.dense",
    "intermediate": "intermediate.dense",
    "output": "output.dense",
}
#: canonical layer-key prefix -> LayerNorm module under "encoder.layer.{i}."
LAYER_NORMS = {
    "attention_ln": "attention.output.LayerNorm",
    "output_ln": "output.LayerNorm",
}
#: canonical key -> tensor name, outside the layers (BERT; optional ones may
#: be absent: a checkpoint without a pooler, e.g. BertForMaskedLM's)
BERT_TOP = {
    "word_embeddings": "embeddings.word_embeddings.weight",
    "position_embeddings": "embeddings.position_embeddings.weight",
    "type_embeddings": "embeddings.token_type_embeddings.weight",
    "pooler_kernel": "pooler.dense.weight",
    "pooler_bias": "pooler.dense.bias",
}
OPTIONAL = ("pooler_kernel", "pooler_bias")
#: the prefixes task checkpoints put the encoder under
PREFIXES = ("bert.", "roberta.", "electra.", "distilbert.", "albert.")


class Tensors:
    """A checkpoint's tensors seen through the encoder's prefix, with errors
    that name the source and the missing tensor."""

    def __init__(self, tensors, source):
        self.source = source
        marker = "embeddings.word_embeddings.weight"
        self.prefix = next((p for p in PREFIXES if p + marker in tensors), "")
        self.tensors = tensors

    def has(self, name):
        return self.prefix + name in self.tensors

    def get(self, name):
        key = self.prefix + name
        if key not in self.tensors:
            raise CheckpointError(f"{self.source}: no tensor {key!r} (is this an encoder "
                                  "checkpoint of the family its config.json names?).")
        return np.asarray(self.tensors[key])

    def linear(self, module):
        """(kernel [in, out], bias) of a torch Linear."""
        return self.get(f"{module}.weight").T, self.get(f"{module}.bias")

    def layer_norm(self, module):
        """(gamma, beta), named weight/bias or gamma/beta."""
        if self.has(f"{module}.gamma"):
            return self.get(f"{module}.gamma"), self.get(f"{module}.beta")
        return self.get(f"{module}.weight"), self.get(f"{module}.bias")


def encoder_layers(tensors):
    """The canonical layer dicts of every "encoder.layer.{i}." in order."""
    layers = []
    while tensors.has(f"encoder.layer.{len(layers)}.attention.self.query.weight"):
        base = f"encoder.layer.{len(layers)}."
        layer = {}
        for key, module in LAYER.items():
            layer[f"{key}_kernel"], layer[f"{key}_bias"] = tensors.linear(base + module)
        for key, module in LAYER_NORMS.items():
            layer[f"{key}_gamma"], layer[f"{key}_beta"] = tensors.layer_norm(base + module)
        layers.append(layer)
    if not layers:
        raise CheckpointError(f"{tensors.source}: no {tensors.prefix}encoder.layer.0.* "
                              "tensors.")
    return layers


def bert_weights_from_hf(tensors):
    """A BERT checkpoint's tensors (`Tensors`) -> the canonical dict. The
    pooler is optional (absent in masked-LM-only checkpoints: then the
    model's pooler keeps its initial weights)."""
    weights = {}
    for key, name in BERT_TOP.items():
        if key in OPTIONAL and not tensors.has(name):
            continue
        value = tensors.get(name)
        weights[key] = value.T if key.endswith("_kernel") else value
    weights["embeddings_ln_gamma"], weights["embeddings_ln_beta"] = tensors.layer_norm(
        "embeddings.LayerNorm")
    weights["layers"] = encoder_layers(tensors)
    return weights


#: Hugging Face `hidden_act` -> ours ("gelu" is the erf form there too).
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_approximate",
               "gelu_pytorch_tanh": "gelu_approximate", "relu": "relu"}


def activation_from_hf(config, source):
    name = config.get("hidden_act", "gelu")
    if name not in ACTIVATIONS:
        raise CheckpointError(f"{source}: hidden_act {name!r} is not one of "
                              f"{sorted(ACTIVATIONS)}.")
    return ACTIVATIONS[name]


def bert_config_from_hf(config, source):
    """A BERT `config.json` -> `BertBackbone` arguments."""
    try:
        dropout = config.get("hidden_dropout_prob", 0.1)
        if config.get("attention_probs_dropout_prob", dropout) != dropout:
            raise CheckpointError(
                f"{source}: hidden_dropout_prob {dropout} and attention_probs_dropout_prob "
                f"{config['attention_probs_dropout_prob']} differ; this encoder has one rate.")
        return {
            "vocabulary_size": int(config["vocab_size"]),
            "num_layers": int(config["num_hidden_layers"]),
            "num_heads": int(config["num_attention_heads"]),
            "hidden_dim": int(config["hidden_size"]),
            "intermediate_dim": int(config["intermediate_size"]),
            "max_sequence_length": int(config.get("max_position_embeddings", 512)),
            "num_segments": int(config.get("type_vocab_size", 2)),
            "dropout": float(dropout),
            "activation": activation_from_hf(config, source),
            "layer_norm_epsilon": float(config.get("layer_norm_eps", 1e-12)),
            "initializer_range": float(config.get("initializer_range", 0.02)),
        }
    except KeyError as err:
        raise CheckpointError(f"{source}: config.json has no {err.args[0]!r}.") from None
