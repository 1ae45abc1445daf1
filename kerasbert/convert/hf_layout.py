"""Hugging Face `transformers` encoder checkpoints, as tables.

A model directory in the Hugging Face layout holds `config.json` (with
`model_type`) and safetensors weights (`safetensors_files.py`). Names follow
the torch modules: BERT, RoBERTa and ELECTRA share one encoder-layer layout
(`ENCODER_LAYOUT`, under "encoder.layer.{i}."; DistilBERT has its own,
`DISTILBERT_LAYOUT`), a family adds its embeddings and pooler, and task
checkpoints put the encoder under a prefix ("bert.", "roberta.", ...). torch `Linear` weights are
[out, in]; the canonical dict (`bert_weights.py`) keeps kernels [in, out].
Older checkpoints name LayerNorm parameters gamma/beta instead of
weight/bias; both are read.
"""

import numpy as np

from kerasbert.convert.bert_weights import LAYER_KEYS
from kerasbert.convert.safetensors_files import CheckpointError
from kerasbert.convert.safetensors_files import StoredTensor

#: A family's encoder layers: where layer i lives, and canonical key prefix
#: -> torch module under it, for the Linears and the LayerNorms. BERT,
#: RoBERTa and ELECTRA share `ENCODER_LAYOUT`.
ENCODER_LAYOUT = {
    "layer": "encoder.layer.{i}.",
    "linear": {
        "query": "attention.self.query",
        "key": "attention.self.key",
        "value": "attention.self.value",
        "attention_output": "attention.output.dense",
        "intermediate": "intermediate.dense",
        "output": "output.dense",
    },
    "norm": {"attention_ln": "attention.output.LayerNorm", "output_ln": "output.LayerNorm"},
}
DISTILBERT_LAYOUT = {
    "layer": "transformer.layer.{i}.",
    "linear": {
        "query": "attention.q_lin",
        "key": "attention.k_lin",
        "value": "attention.v_lin",
        "attention_output": "attention.out_lin",
        "intermediate": "ffn.lin1",
        "output": "ffn.lin2",
    },
    "norm": {"attention_ln": "sa_layer_norm", "output_ln": "output_layer_norm"},
}
#: the prefixes task checkpoints put the encoder under
PREFIXES = ("bert.", "roberta.", "electra.", "distilbert.", "albert.", "transformer.",
            "reformer.", "model.")
#: a tensor every checkpoint of the layout has (finds the prefix): the
#: encoders' word embeddings, GPT-1's and ModernBERT's token tables.
MARKERS = ("embeddings.word_embeddings.weight", "tokens_embed.weight",
           "embeddings.tok_embeddings.weight")


class Tensors:
    """A checkpoint's tensors seen through the encoder's prefix, with errors
    that name the source and the missing tensor."""

    def __init__(self, tensors, source):
        self.source = source
        self.prefix = next((p for p in PREFIXES for m in MARKERS if p + m in tensors), "")
        self.tensors = tensors

    def has(self, name):
        return self.prefix + name in self.tensors

    def get(self, name):
        key = self.prefix + name
        if key not in self.tensors:
            raise CheckpointError(f"{self.source}: no tensor {key!r} (is this an encoder "
                                  "checkpoint of the family its config.json names?).")
        value = self.tensors[key]
        # Stored tensors stay on disk until they are assigned (one at a time).
        return value if isinstance(value, StoredTensor) else np.asarray(value)

    def linear(self, module):
        """(kernel [in, out], bias) of a torch Linear."""
        return self.get(f"{module}.weight").T, self.get(f"{module}.bias")

    def layer_norm(self, module):
        """(gamma, beta), named weight/bias or gamma/beta."""
        if self.has(f"{module}.gamma"):
            return self.get(f"{module}.gamma"), self.get(f"{module}.beta")
        return self.get(f"{module}.weight"), self.get(f"{module}.bias")


def block_from_hf(tensors, base, layout):
    """The canonical layer dict of the block whose modules are under `base`."""
    layer = {}
    for key, module in layout["linear"].items():
        layer[f"{key}_kernel"], layer[f"{key}_bias"] = tensors.linear(base + module)
    for key, module in layout["norm"].items():
        layer[f"{key}_gamma"], layer[f"{key}_beta"] = tensors.layer_norm(base + module)
    return layer


def encoder_layers(tensors, layout=ENCODER_LAYOUT):
    """The canonical layer dicts of every layer of `layout`, in order."""
    layers = []
    first = layout["linear"]["query"] + ".weight"
    while tensors.has(layout["layer"].format(i=len(layers)) + first):
        layers.append(block_from_hf(tensors, layout["layer"].format(i=len(layers)), layout))
    if not layers:
        raise CheckpointError(f"{tensors.source}: no {tensors.prefix}"
                              f"{layout['layer'].format(i=0)}* tensors.")
    return layers


def embeddings_from_hf(tensors, types=True):
    """Token and position tables (and the segment table with `types`) and
    the embedding LayerNorm."""
    weights = {"word_embeddings": tensors.get("embeddings.word_embeddings.weight"),
               "position_embeddings": tensors.get("embeddings.position_embeddings.weight")}
    if types:
        weights["type_embeddings"] = tensors.get("embeddings.token_type_embeddings.weight")
    weights["embeddings_ln_gamma"], weights["embeddings_ln_beta"] = tensors.layer_norm(
        "embeddings.LayerNorm")
    return weights

#: ALBERT's distinct blocks: group g, inner block r (the layers share them).
ALBERT_LAYOUT = {
    "layer": "encoder.albert_layer_groups.{g}.albert_layers.{r}.",
    "linear": {
        "query": "attention.query",
        "key": "attention.key",
        "value": "attention.value",
        "attention_output": "attention.dense",
        "intermediate": "ffn",
        "output": "ffn_output",
    },
    "norm": {"attention_ln": "attention.LayerNorm", "output_ln": "full_layer_layer_norm"},
}


def albert_weights_from_hf(tensors, num_groups, num_inner_repetitions):
    """An ALBERT checkpoint's tensors -> the canonical ALBERT dict
    (`albert_weights.py`: "groups" of distinct blocks, the factorised
    embedding's projection)."""
    weights = embeddings_from_hf(tensors)
    weights["embedding_projection_kernel"], weights["embedding_projection_bias"] = (
        tensors.linear("encoder.embedding_hidden_mapping_in"))
    if tensors.has("pooler.weight"):
        weights["pooler_kernel"], weights["pooler_bias"] = tensors.linear("pooler")
    weights["groups"] = [
        [block_from_hf(tensors, ALBERT_LAYOUT["layer"].format(g=g, r=r), ALBERT_LAYOUT)
         for r in range(num_inner_repetitions)]
        for g in range(num_groups)]
    return weights


def distilbert_weights_from_hf(tensors):
    """A DistilBERT checkpoint's tensors -> the canonical dict (no segment
    table, no pooler)."""
    return dict(embeddings_from_hf(tensors, types=False),
                layers=encoder_layers(tensors, DISTILBERT_LAYOUT))


def bert_weights_from_hf(tensors):
    """A BERT checkpoint's tensors (`Tensors`) -> the canonical dict. The
    pooler is optional (absent in masked-LM-only checkpoints)."""
    weights = embeddings_from_hf(tensors)
    if tensors.has("pooler.dense.weight"):
        weights["pooler_kernel"], weights["pooler_bias"] = tensors.linear("pooler.dense")
    weights["layers"] = encoder_layers(tensors)
    return weights


def canonical_shapes(kwargs):
    """({top-level key: (shape, arguments that size it)}, {layer key: ...})
    of the canonical dict (`bert_weights.py`) a backbone of `kwargs`
    takes, from the arguments alone (nothing built)."""
    hidden, inner = kwargs["hidden_dim"], kwargs["intermediate_dim"]
    width_key = "embedding_dim" if kwargs.get("embedding_dim") else "hidden_dim"
    width = kwargs.get("embedding_dim") or hidden
    top = {
        "word_embeddings": ((kwargs["vocabulary_size"], width), ("vocabulary_size", width_key)),
        "position_embeddings": ((kwargs["max_sequence_length"], width),
                                ("max_sequence_length", width_key)),
        "embeddings_ln_gamma": ((width,), (width_key,)),
        "embeddings_ln_beta": ((width,), (width_key,)),
        "embedding_projection_kernel": ((width, hidden), (width_key, "hidden_dim")),
        "embedding_projection_bias": ((hidden,), ("hidden_dim",)),
        "pooler_kernel": ((hidden, hidden), ("hidden_dim",)),
        "pooler_bias": ((hidden,), ("hidden_dim",)),
    }
    if "num_segments" in kwargs:
        top["type_embeddings"] = ((kwargs["num_segments"], width), ("num_segments", width_key))
    layer = {key: (((hidden, hidden) if key.endswith("kernel") else (hidden,)), ("hidden_dim",))
             for key in LAYER_KEYS}
    layer["intermediate_kernel"] = ((hidden, inner), ("hidden_dim", "intermediate_dim"))
    layer["intermediate_bias"] = ((inner,), ("intermediate_dim",))
    layer["output_kernel"] = ((inner, hidden), ("intermediate_dim", "hidden_dim"))
    return top, layer


def shape_mismatch(source, weights_file, names, kwargs, label, expected, fields, actual):
    """The error for a tensor whose shape is not the one config.json gives
    it, naming both."""
    said = ", ".join(f"{names.get(f, f)}={kwargs.get(f)}" for f in dict.fromkeys(fields))
    return CheckpointError(f"{source}: config.json says {said}, so {label} should be "
                           f"{tuple(expected)}; {weights_file} holds {tuple(actual)}.")


def check_canonical_shapes(weights, kwargs, names, source, weights_file):
    """Compares a canonical dict read from a checkpoint (shapes only: its
    values are still on disk) with the shapes `kwargs` give it, before any
    model is built.

    Raises:
        CheckpointError: naming the config.json fields, the tensor and both
            shapes, or the layer counts.
    """
    top, layer = canonical_shapes(kwargs)
    checks = [(key, weights.get(key), top[key]) for key in top]
    if "layers" in weights:
        if len(weights["layers"]) != kwargs["num_layers"]:
            raise CheckpointError(
                f"{source}: config.json says {names.get('num_layers')}={kwargs['num_layers']}; "
                f"{weights_file} holds {len(weights['layers'])} layers.")
        blocks = weights["layers"]
    else:  # ALBERT: groups of distinct blocks
        blocks = [block for group in weights["groups"] for block in group]
    for i, block in enumerate(blocks):
        checks += [(f"layer {i} {key}", block.get(key), layer[key]) for key in layer]
    for key, value, (shape, fields) in checks:
        if value is not None and tuple(value.shape) != tuple(shape):
            actual = value.shape
            if getattr(value, "transposed", False):  # a torch Linear: name both as stored
                shape, actual = tuple(shape)[::-1], value.stored_shape
            raise shape_mismatch(source, weights_file, names, kwargs,
                                 getattr(value, "name", None) or key, shape, fields, actual)


#: Hugging Face `hidden_act` -> ours ("gelu" is the erf form there too).
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_approximate",
               "gelu_pytorch_tanh": "gelu_approximate", "relu": "relu"}


def activation_from_hf(config, source):
    name = config.get("hidden_act", "gelu")
    if name not in ACTIVATIONS:
        raise CheckpointError(f"{source}: hidden_act {name!r} is not one of "
                              f"{sorted(ACTIVATIONS)}.")
    return ACTIVATIONS[name]


def _one_dropout(config, hidden_key, attention_key, source):
    """The single dropout rate of our encoders; a checkpoint with two
    different rates is refused naming both."""
    dropout = config.get(hidden_key, 0.1)
    if config.get(attention_key, dropout) != dropout:
        raise CheckpointError(f"{source}: {hidden_key} {dropout} and {attention_key} "
                              f"{config[attention_key]} differ; this encoder has one rate.")
    return float(dropout)


def _required(config, source, **keys):
    """{our name: int(config[their name])}, a clear error for a missing key."""
    try:
        return {ours: int(config[theirs]) for ours, theirs in keys.items()}
    except KeyError as err:
        raise CheckpointError(f"{source}: config.json has no {err.args[0]!r}.") from None


def bert_config_from_hf(config, source):
    """A BERT `config.json` -> `BertBackbone` arguments."""
    return dict(
        _required(config, source, vocabulary_size="vocab_size", num_layers="num_hidden_layers",
                  num_heads="num_attention_heads", hidden_dim="hidden_size",
                  intermediate_dim="intermediate_size"),
        max_sequence_length=int(config.get("max_position_embeddings", 512)),
        num_segments=int(config.get("type_vocab_size", 2)),
        dropout=_one_dropout(config, "hidden_dropout_prob", "attention_probs_dropout_prob",
                             source),
        activation=activation_from_hf(config, source),
        layer_norm_epsilon=float(config.get("layer_norm_eps", 1e-12)),
        initializer_range=float(config.get("initializer_range", 0.02)),
    )


def distilbert_config_from_hf(config, source):
    """A DistilBERT `config.json` -> `DistilBertBackbone` arguments."""
    if ACTIVATIONS.get(config.get("activation", "gelu")) != "gelu":
        raise CheckpointError(f"{source}: activation {config.get('activation')!r}; "
                              "DistilBERT's encoder uses the erf GELU.")
    return dict(
        _required(config, source, vocabulary_size="vocab_size", num_layers="n_layers",
                  num_heads="n_heads", hidden_dim="dim", intermediate_dim="hidden_dim"),
        max_sequence_length=int(config.get("max_position_embeddings", 512)),
        dropout=_one_dropout(config, "dropout", "attention_dropout", source),
        initializer_range=float(config.get("initializer_range", 0.02)),
    )


def albert_config_from_hf(config, source):
    """An ALBERT `config.json` -> `AlbertBackbone` arguments."""
    return dict(bert_config_from_hf(config, source),
                **_required(config, source, embedding_dim="embedding_size"),
                num_groups=int(config.get("num_hidden_groups", 1)),
                num_inner_repetitions=int(config.get("inner_group_num", 1)))


def electra_weights_from_hf(tensors):
    """An ELECTRA discriminator's tensors -> the canonical dict: BERT's
    encoder layers, embeddings `embedding_size` wide and, when that differs
    from the hidden size, the `embeddings_project` Linear. The checkpoint has
    no pooler (ours keeps its initial weights, as keras-hub's does)."""
    weights = embeddings_from_hf(tensors)
    if tensors.has("embeddings_project.weight"):
        weights["embedding_projection_kernel"], weights["embedding_projection_bias"] = (
            tensors.linear("embeddings_project"))
    weights["layers"] = encoder_layers(tensors)
    return weights


def electra_config_from_hf(config, source):
    """An ELECTRA `config.json` -> `ElectraBackbone` arguments."""
    kwargs = bert_config_from_hf(config, source)
    embedding = int(config.get("embedding_size", kwargs["hidden_dim"]))
    kwargs["embedding_dim"] = None if embedding == kwargs["hidden_dim"] else embedding
    return kwargs


#: GPT-1 (`openai-gpt`): post-LayerNorm blocks under "h.{i}.", whose Conv1D
#: weights are stored [in, out] (no transpose) and whose query, key and value
#: share one `c_attn` [H, 3H] (columns q | k | v).
GPT_BLOCK = {"attention_output": "attn.c_proj", "intermediate": "mlp.c_fc",
             "output": "mlp.c_proj", "attention_ln": "ln_1", "output_ln": "ln_2"}


def gpt_weights_from_hf(tensors):
    """An `openai-gpt` checkpoint's tensors -> the canonical dict (no
    segment table, no embedding LayerNorm, no pooler)."""
    weights = {"word_embeddings": tensors.get("tokens_embed.weight"),
               "position_embeddings": tensors.get("positions_embed.weight"), "layers": []}
    while tensors.has(f"h.{len(weights['layers'])}.attn.c_attn.weight"):
        base = f"h.{len(weights['layers'])}."
        kernel = np.asarray(tensors.get(base + "attn.c_attn.weight"))
        bias = np.asarray(tensors.get(base + "attn.c_attn.bias"))
        layer = {}
        for part, k, b in zip(("query", "key", "value"), np.split(kernel, 3, axis=1),
                              np.split(bias, 3)):
            layer[f"{part}_kernel"], layer[f"{part}_bias"] = k, b
        for key, module in GPT_BLOCK.items():
            if key.endswith("_ln"):
                layer[f"{key}_gamma"], layer[f"{key}_beta"] = tensors.layer_norm(base + module)
            else:  # Conv1D: [in, out] already
                layer[f"{key}_kernel"] = tensors.get(base + module + ".weight")
                layer[f"{key}_bias"] = tensors.get(base + module + ".bias")
        weights["layers"].append(layer)
    if not weights["layers"]:
        raise CheckpointError(f"{tensors.source}: no {tensors.prefix}h.0.* tensors.")
    return weights


#: GPT-1's `afn` -> ours: transformers' OpenAI GPT maps "gelu" to the tanh
#: form (`gelu_new`), as OpenAI's code had it.
GPT_ACTIVATIONS = {"gelu": "gelu_approximate", "gelu_new": "gelu_approximate",
                   "relu": "relu"}


def gpt_config_from_hf(config, source):
    """An `openai-gpt` `config.json` -> `GptBackbone` arguments (the
    feed-forward is 4 x n_embd wide there)."""
    kwargs = _required(config, source, vocabulary_size="vocab_size", num_layers="n_layer",
                       num_heads="n_head", hidden_dim="n_embd")
    afn = config.get("afn", "gelu")
    if afn not in GPT_ACTIVATIONS:
        raise CheckpointError(f"{source}: afn {afn!r} is not one of {sorted(GPT_ACTIVATIONS)}.")
    rates = {float(config.get(k, 0.1)) for k in ("resid_pdrop", "attn_pdrop", "embd_pdrop")}
    if len(rates) != 1:
        raise CheckpointError(f"{source}: resid/attn/embd dropout rates {sorted(rates)} differ; "
                              "this decoder has one rate.")
    return dict(kwargs, intermediate_dim=4 * kwargs["hidden_dim"],
                max_sequence_length=int(config.get("n_positions", 512)), dropout=rates.pop(),
                layer_norm_epsilon=float(config.get("layer_norm_epsilon", 1e-5)),
                activation=GPT_ACTIVATIONS[afn],
                initializer_range=float(config.get("initializer_range", 0.02)))


def big_bird_config_from_hf(config, source):
    """A BigBird `config.json` -> `BigBirdBackbone` arguments: BERT's, with
    its attention ("block_sparse" or "original_full"), block size and random
    blocks. Variants our encoder does not have are refused."""
    if config.get("rescale_embeddings") or not config.get("use_bias", True):
        raise CheckpointError(f"{source}: rescale_embeddings / use_bias=false BigBird variants "
                              "are not this encoder.")
    attention = config.get("attention_type", "block_sparse")
    if attention not in ("block_sparse", "original_full"):
        raise CheckpointError(f"{source}: attention_type {attention!r} is not block_sparse or "
                              "original_full.")
    return dict(bert_config_from_hf(config, source),
                attention="bigbird" if attention == "block_sparse" else "full",
                block_size=int(config.get("block_size", 64)),
                num_random_blocks=int(config.get("num_random_blocks", 3)))
