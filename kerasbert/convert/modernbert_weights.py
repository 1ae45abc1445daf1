"""Hugging Face ModernBERT checkpoints (`model_type` "modernbert",
answerdotai/ModernBERT-base and -large) <-> `ModernBertBackbone`.

The one table of names is `tensor_table(kwargs)`: every checkpoint tensor
(without the "model." prefix a `ModernBertForMaskedLM` folder puts on the
encoder), the backbone variable it fills, its shape as stored (torch Linear
weights are [out, in], ours [in, out]) and the config.json fields that size
it. Reading checks every shape against it before anything is built;
writing walks it backwards. The masked-LM head (`head.dense`, `head.norm`,
`decoder.bias`) is `kerasbert.convert.hf_heads`'s.

config.json comes in two forms, both read (`modernbert_config_from_hf`):

    published (2024)              transformers 5
    global_attn_every_n_layers    layer_types ["full_attention",
                                    "sliding_attention", ...]
    global_rope_theta,            rope_parameters {"full_attention":
      local_rope_theta              {"rope_theta", "rope_type"},
                                    "sliding_attention": {...}}
    local_attention               local_attention (or sliding_window,
                                    half of it)

Settings this backbone does not compute are refused naming the key: biases
(norm_bias, attention_bias, mlp_bias true), an activation other than the
exact GELU, layer types other than "every n-th layer global, from layer 0",
rope types other than "default", rope scaling, two different dropout rates.
`modernbert_config_to_hf` writes the published form.
"""

import numpy as np

from kerasbert.convert.bert_weights import _assign
from kerasbert.convert.safetensors_files import CheckpointError

#: Where a `ModernBertForMaskedLM` folder puts the encoder.
PREFIX = "model."
#: The tensors of the masked-LM head (`hf_heads`), not the backbone's.
HEAD_PREFIXES = ("head.", "decoder.")
GLOBAL, LOCAL = "full_attention", "sliding_attention"


def tensor_table(kwargs):
    """[(checkpoint name, variable path in the backbone, stored shape,
    fields that size it, transposed)] of a backbone of `kwargs`, from the
    arguments alone (nothing built). A path is attribute names and list
    indices joined by dots ("transformer_layers.3.attention.qkv_dense.kernel")."""
    hidden, inner = kwargs["hidden_dim"], kwargs["intermediate_dim"]
    width = ("hidden_dim",)
    table = [("embeddings.tok_embeddings.weight", "embeddings.token_embedding.embeddings",
              (kwargs["vocabulary_size"], hidden), ("vocabulary_size", "hidden_dim"), False),
             ("embeddings.norm.weight", "embeddings.layer_norm.gamma", (hidden,), width, False)]
    for i in range(kwargs["num_layers"]):
        base, ours = f"layers.{i}.", f"transformer_layers.{i}."
        if i:  # the first layer has no attention LayerNorm
            table.append((base + "attn_norm.weight", ours + "attention_layer_norm.gamma",
                          (hidden,), width, False))
        table += [
            (base + "attn.Wqkv.weight", ours + "attention.qkv_dense.kernel",
             (3 * hidden, hidden), width, True),
            (base + "attn.Wo.weight", ours + "attention.output_dense.kernel",
             (hidden, hidden), width, True),
            (base + "mlp_norm.weight", ours + "feed_forward_layer_norm.gamma", (hidden,), width,
             False),
            (base + "mlp.Wi.weight", ours + "feed_forward.input_dense.kernel",
             (2 * inner, hidden), ("intermediate_dim", "hidden_dim"), True),
            (base + "mlp.Wo.weight", ours + "feed_forward.output_dense.kernel",
             (hidden, inner), ("hidden_dim", "intermediate_dim"), True),
        ]
    table.append(("final_norm.weight", "final_norm.gamma", (hidden,), width, False))
    return table


def variable_at(backbone, path):
    """The variable at a `tensor_table` path."""
    node = backbone
    for part in path.split("."):
        node = node[int(part)] if part.isdigit() else getattr(node, part)
    return node


def expected_shapes(kwargs):
    """{checkpoint name: (stored shape, fields)}: what a checkpoint of this
    config.json must hold (`hf_checkpoint` checks it before building)."""
    return {name: (shape, fields) for name, _, shape, fields, _ in tensor_table(kwargs)}


def stored_layers(tensors):
    """How many encoder layers a checkpoint (`hf_layout.Tensors`) holds."""
    count = 0
    while tensors.has(f"layers.{count}.attn.Wqkv.weight"):
        count += 1
    return count


def set_modernbert_weights(backbone, tensors):
    """Fills `backbone` from a checkpoint's tensors (`hf_layout.Tensors`,
    shapes already checked). Every variable is filled and every tensor but
    the masked-LM head's used: a tensor with no place is an error naming it."""
    used = set()
    for name, path, _, _, transposed in tensor_table(backbone.get_config()):
        value = tensors.get(name)
        _assign(variable_at(backbone, path), value.T if transposed else value,
                tensors.prefix + name)
        used.add(tensors.prefix + name)
    left = sorted(k for k in tensors.tensors
                  if k not in used and not k.startswith(HEAD_PREFIXES))
    if left:
        raise CheckpointError(f"{tensors.source}: tensors this ModernBERT has no place for: "
                              f"{', '.join(left[:5])}{' ...' if len(left) > 5 else ''}.")
    return backbone


def modernbert_tensors_to_hf(backbone, prefix=PREFIX):
    """{published name: array} of `backbone` (torch Linear weights [out,
    in]), under `prefix` as a ModernBertForMaskedLM folder has them."""
    tensors = {}
    for name, path, _, _, transposed in tensor_table(backbone.get_config()):
        value = np.asarray(variable_at(backbone, path).numpy())
        tensors[prefix + name] = value.T if transposed else value
    return tensors


# --- config.json -----------------------------------------------------------------


def _flag_off(config, key, source, what):
    if config.get(key, False) is not False:
        raise CheckpointError(f"{source}: {key}={config[key]!r}: this ModernBERT has no "
                              f"{what} (the published models set false).")


def _every_n(layer_types, num_layers, source):
    """n of a layer_types list that is "global at 0, n, 2n, ...", else an
    error naming the key."""
    if not isinstance(layer_types, list) or len(layer_types) != num_layers:
        raise CheckpointError(f"{source}: layer_types must list {num_layers} layer types "
                              f"(num_hidden_layers); got {layer_types!r:.120}.")
    globals_ = [i for i, kind in enumerate(layer_types) if kind == GLOBAL]
    every = globals_[1] if len(globals_) > 1 else num_layers
    if [GLOBAL if i % every == 0 else LOCAL for i in range(num_layers)] != layer_types:
        raise CheckpointError(f"{source}: layer_types {layer_types!r:.120} is not 'every n-th "
                              "layer full_attention from layer 0, the others "
                              "sliding_attention', the pattern this ModernBERT computes.")
    return every


def _rope_thetas(config, source):
    """(global, local) rotary bases from either form; rope types other than
    "default" and any rope scaling are refused."""
    if config.get("rope_scaling") is not None:
        raise CheckpointError(f"{source}: rope_scaling={config['rope_scaling']!r:.80}: this "
                              "ModernBERT computes the default rotary embedding only.")
    parameters = config.get("rope_parameters") or {}
    if not isinstance(parameters, dict):
        raise CheckpointError(f"{source}: rope_parameters must be an object.")
    thetas = []
    for kind, old_key, default in ((GLOBAL, "global_rope_theta", 160000.0),
                                   (LOCAL, "local_rope_theta", 10000.0)):
        entry = parameters.get(kind) or {}
        if not isinstance(entry, dict) or entry.get("rope_type", "default") != "default":
            raise CheckpointError(f"{source}: rope_parameters.{kind}={entry!r:.80}: rope_type "
                                  "must be \"default\" (the one this ModernBERT computes).")
        theta = entry.get("rope_theta", config.get(old_key, default))
        if isinstance(theta, bool) or not isinstance(theta, (int, float)) or not theta > 0:
            raise CheckpointError(f"{source}: rope_theta of {kind} is {theta!r}; must be a "
                                  "number > 0.")
        thetas.append(float(theta))
    return tuple(thetas)


def _local_attention(config, source):
    window = config.get("local_attention")
    if "sliding_window" in config and config["sliding_window"] is not None:
        from_half = 2 * config["sliding_window"]
        if window is not None and window != from_half:
            raise CheckpointError(f"{source}: local_attention={window} and sliding_window="
                                  f"{config['sliding_window']} disagree (local_attention is "
                                  "twice sliding_window).")
        window = from_half
    return 128 if window is None else window


def _one_dropout(config, source):
    rates = {key: config.get(key, 0.0) for key in
             ("attention_dropout", "embedding_dropout", "mlp_dropout")}
    if len(set(rates.values())) != 1:
        raise CheckpointError(f"{source}: dropout rates {rates} differ; this ModernBERT has "
                              "one rate.")
    return float(rates["attention_dropout"])


def modernbert_config_from_hf(config, source):
    """A ModernBERT `config.json` (either form) -> `ModernBertBackbone`
    arguments; a setting this backbone does not compute is refused naming
    its key (`CheckpointError`)."""
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                "intermediate_size"):
        if key not in config:
            raise CheckpointError(f"{source}: config.json has no {key!r}.")
    _flag_off(config, "norm_bias", source, "LayerNorm biases")
    _flag_off(config, "attention_bias", source, "attention biases")
    _flag_off(config, "mlp_bias", source, "feed-forward biases")
    activation = config.get("hidden_activation", "gelu")
    if activation != "gelu":
        raise CheckpointError(f"{source}: hidden_activation={activation!r}: this ModernBERT's "
                              "GeGLU uses the exact GELU (\"gelu\").")
    layers = config["num_hidden_layers"]
    every = config.get("global_attn_every_n_layers", 3)
    if config.get("layer_types") is not None:
        every = _every_n(config["layer_types"], layers, source)
    global_theta, local_theta = _rope_thetas(config, source)
    return dict(
        vocabulary_size=config["vocab_size"], num_layers=layers,
        num_heads=config["num_attention_heads"], hidden_dim=config["hidden_size"],
        intermediate_dim=config["intermediate_size"],
        max_sequence_length=config.get("max_position_embeddings", 8192),
        dropout=_one_dropout(config, source),
        layer_norm_epsilon=float(config.get("norm_eps", 1e-5)),
        initializer_range=float(config.get("initializer_range", 0.02)),
        global_attn_every_n_layers=every, local_attention=_local_attention(config, source),
        global_rope_theta=global_theta, local_rope_theta=local_theta)


def modernbert_config_to_hf(backbone):
    """`ModernBertBackbone` -> config.json in the published (2024) form,
    which transformers 4.48+ and 5 both read."""
    return {
        "architectures": ["ModernBertForMaskedLM"], "model_type": "modernbert",
        "vocab_size": backbone.vocabulary_size, "hidden_size": backbone.hidden_dim,
        "intermediate_size": backbone.intermediate_dim,
        "num_hidden_layers": backbone.num_layers,
        "num_attention_heads": backbone.num_heads, "hidden_activation": "gelu",
        "max_position_embeddings": backbone.max_sequence_length,
        "initializer_range": backbone.initializer_range, "initializer_cutoff_factor": 2.0,
        "norm_eps": backbone.layer_norm_epsilon, "norm_bias": False,
        "global_rope_theta": backbone.global_rope_theta,
        "local_rope_theta": backbone.local_rope_theta,
        "global_attn_every_n_layers": backbone.global_attn_every_n_layers,
        "local_attention": backbone.local_attention,
        "attention_bias": False, "attention_dropout": backbone.dropout,
        "embedding_dropout": backbone.dropout, "mlp_bias": False,
        "mlp_dropout": backbone.dropout, "decoder_bias": True, "classifier_bias": False,
        "classifier_activation": "gelu", "classifier_pooling": "mean",
        "classifier_dropout": 0.0, "tie_word_embeddings": True,
        "pad_token_id": 50283, "bos_token_id": 50281, "eos_token_id": 50282,
        "cls_token_id": 50281, "sep_token_id": 50282,
    }
