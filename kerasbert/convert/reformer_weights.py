"""Hugging Face Reformer checkpoints (`model_type` "reformer",
google/reformer-enwik8, google/reformer-crime-and-punishment) <->
`ReformerBackbone` and the untied head of `CausalLM`.

The one table of names: `tensor_map` lists, for a backbone, every
checkpoint tensor with the variable it fills and how (torch Linear weights
are [out, in], ours [in, out]; the axial tables carry singleton axes,
[a0, 1, d0] and [1, a1, d1]). The LM head (`lm_head.decoder`, [V, 2h] and
its bias) is read by `lm_head_from_hf`.

Tensors a checkpoint may carry that hold no weights are skipped: the
attention mask constants of older transformers versions
(`*.mask_value_float16/32`) and `lm_head.bias`, a copy of the decoder's
bias (or a stale zero vector) depending on the version that saved it.
"""

import numpy as np

from kerasbert.convert.bert_weights import _assign
from kerasbert.convert.safetensors_files import CheckpointError
from kerasbert.models.reformer import ReformerBackbone
from kerasbert.models.reformer.reformer_backbone import layer_kinds

_HEAD = "lm_head.decoder"
_IGNORED_SUFFIXES = ("mask_value_float16", "mask_value_float32")
_IGNORED = ("lm_head.bias",)


def reformer_config_from_hf(config, source):
    """A Reformer `config.json` -> `ReformerBackbone` arguments. Variants
    this backbone does not build (sinusoidal positions, chunked LM head
    options aside) are refused with the key's name."""
    def need(key):
        if key not in config:
            raise CheckpointError(f"{source}: config.json has no {key!r}.")
        return config[key]

    if config.get("sinusoidal_pos_embds") or not config.get("axial_pos_embds", True):
        raise CheckpointError(f"{source}: only axial position embeddings are supported "
                              "(axial_pos_embds true).")
    if config.get("hidden_act", "relu") not in ("relu", "gelu", "gelu_new"):
        raise CheckpointError(f"{source}: hidden_act {config.get('hidden_act')!r} is not relu "
                              "or gelu.")
    if (config.get("lsh_num_chunks_before", 1), config.get("lsh_num_chunks_after", 0)) != (
            config.get("local_num_chunks_before", 1), config.get("local_num_chunks_after", 0)):
        raise CheckpointError(f"{source}: LSH and local attention look at different neighbour "
                              "chunks; this backbone shares one setting.")
    layers = list(need("attn_layers"))
    axial_shape = [int(a) for a in need("axial_pos_shape")]
    buckets = need("num_buckets")
    activation = {"gelu": "gelu", "gelu_new": "gelu_approximate"}.get(config.get("hidden_act"),
                                                                        "relu")
    return dict(
        vocabulary_size=int(need("vocab_size")), num_layers=len(layers),
        num_heads=int(need("num_attention_heads")), hidden_dim=int(need("hidden_size")),
        intermediate_dim=int(need("feed_forward_size")),
        head_dim=int(need("attention_head_size")),
        max_sequence_length=axial_shape[0] * axial_shape[1], attention_layers=layers,
        num_hashes=int(config.get("num_hashes", 1)),
        num_buckets=int(buckets) if isinstance(buckets, int) else [int(b) for b in buckets],
        lsh_chunk_length=int(config.get("lsh_attn_chunk_length", 64)),
        local_chunk_length=int(config.get("local_attn_chunk_length", 64)),
        num_chunks_before=int(config.get("lsh_num_chunks_before", 1)),
        num_chunks_after=int(config.get("lsh_num_chunks_after", 0)),
        axial_shape=axial_shape, axial_dims=[int(d) for d in need("axial_pos_embds_dim")],
        causal=bool(config.get("is_decoder", False)), activation=activation,
        dropout=float(config.get("hidden_dropout_prob", 0.05)),
        attention_dropout=float(config.get("lsh_attention_probs_dropout_prob", 0.0)),
        layer_norm_epsilon=float(config.get("layer_norm_eps", 1e-12)),
        initializer_range=float(config.get("initializer_range", 0.02)),
    )


def tensor_map(backbone):
    """[(checkpoint name without the "reformer." prefix, variable, transform)]
    for every weight of `backbone` (transform: checkpoint array -> ours)."""
    emb = backbone.embeddings
    entries = [
        ("embeddings.word_embeddings.weight", emb.token_embedding.embeddings, None),
        ("embeddings.position_embeddings.weights.0", emb.position_embedding.row_embeddings,
         lambda w: np.reshape(w, (w.shape[0], w.shape[-1]))),
        ("embeddings.position_embeddings.weights.1", emb.position_embedding.column_embeddings,
         lambda w: np.reshape(w, (w.shape[1], w.shape[-1]))),
        ("encoder.layer_norm.weight", backbone.final_norm.gamma, None),
        ("encoder.layer_norm.bias", backbone.final_norm.beta, None),
    ]
    for i, (f, g) in enumerate(backbone.transformer_layers):
        base = f"encoder.layers.{i}."
        att = f.inner
        projections = ([("query_key", att.query_key_dense), ("value", att.value_dense)]
                       if hasattr(att, "query_key_dense") else
                       [("query", att.query_dense), ("key", att.key_dense),
                        ("value", att.value_dense)])
        for name, dense in projections:
            entries.append((f"{base}attention.self_attention.{name}.weight", dense.kernel,
                            np.transpose))
        entries += [
            (f"{base}attention.output.dense.weight", att.output_dense.kernel, np.transpose),
            (f"{base}attention.layer_norm.weight", f.layer_norm.gamma, None),
            (f"{base}attention.layer_norm.bias", f.layer_norm.beta, None),
            (f"{base}feed_forward.layer_norm.weight", g.layer_norm.gamma, None),
            (f"{base}feed_forward.layer_norm.bias", g.layer_norm.beta, None),
            (f"{base}feed_forward.dense.dense.weight", g.inner.intermediate_dense.kernel,
             np.transpose),
            (f"{base}feed_forward.dense.dense.bias", g.inner.intermediate_dense.bias, None),
            (f"{base}feed_forward.output.dense.weight", g.inner.output_dense.kernel,
             np.transpose),
            (f"{base}feed_forward.output.dense.bias", g.inner.output_dense.bias, None),
        ]
    return entries


def expected_shapes(kwargs):
    """{checkpoint name without "reformer.": (shape, the arguments that size
    it)} of every tensor `tensor_map` fills, from the arguments alone
    (nothing built): what a checkpoint of this config.json must hold."""
    hidden, inner = kwargs["hidden_dim"], kwargs["intermediate_dim"]
    heads = kwargs["num_heads"] * (kwargs.get("head_dim") or hidden // kwargs["num_heads"])
    width = ("num_heads", "head_dim", "hidden_dim")
    (rows, cols), (row_dim, col_dim) = kwargs["axial_shape"], kwargs["axial_dims"]
    shapes = {
        "embeddings.word_embeddings.weight": ((kwargs["vocabulary_size"], hidden),
                                              ("vocabulary_size", "hidden_dim")),
        "embeddings.position_embeddings.weights.0": ((rows, 1, row_dim),
                                                     ("axial_shape", "axial_dims")),
        "embeddings.position_embeddings.weights.1": ((1, cols, col_dim),
                                                     ("axial_shape", "axial_dims")),
        "encoder.layer_norm.weight": ((2 * hidden,), ("hidden_dim",)),
        "encoder.layer_norm.bias": ((2 * hidden,), ("hidden_dim",)),
    }
    for i, kind in enumerate(layer_kinds(kwargs["attention_layers"], kwargs["num_layers"])):
        base = f"encoder.layers.{i}."
        for name in (("query_key", "value") if kind == "lsh" else ("query", "key", "value")):
            shapes[f"{base}attention.self_attention.{name}.weight"] = ((heads, hidden), width)
        shapes[f"{base}attention.output.dense.weight"] = ((hidden, heads), width)
        for norm in ("attention.layer_norm", "feed_forward.layer_norm"):
            shapes[f"{base}{norm}.weight"] = shapes[f"{base}{norm}.bias"] = (
                (hidden,), ("hidden_dim",))
        shapes[f"{base}feed_forward.dense.dense.weight"] = ((inner, hidden),
                                                            ("intermediate_dim", "hidden_dim"))
        shapes[f"{base}feed_forward.dense.dense.bias"] = ((inner,), ("intermediate_dim",))
        shapes[f"{base}feed_forward.output.dense.weight"] = ((hidden, inner),
                                                             ("hidden_dim", "intermediate_dim"))
        shapes[f"{base}feed_forward.output.dense.bias"] = ((hidden,), ("hidden_dim",))
    return shapes


def stored_layers(tensors):
    """How many encoder layers a Reformer checkpoint (`hf_layout.Tensors`)
    holds."""
    count = 0
    while tensors.has(f"encoder.layers.{count}.attention.layer_norm.weight"):
        count += 1
    return count


def _is_ignored(name):
    return name in _IGNORED or name.endswith(_IGNORED_SUFFIXES)


def set_reformer_weights(backbone, tensors):
    """Fills `backbone` from a checkpoint's tensors (`hf_layout.Tensors`).
    Every backbone variable must be filled and every checkpoint tensor but
    the LM head and the ignored ones used: a mismatch names the tensor."""
    if not isinstance(backbone, ReformerBackbone):
        raise TypeError(f"expected a ReformerBackbone, got {type(backbone).__name__}")
    used = set()
    for name, variable, transform in tensor_map(backbone):
        value = np.asarray(tensors.get(name))
        if transform is not None:
            value = transform(value)
        _assign(variable, value, tensors.prefix + name)
        used.add(tensors.prefix + name)
    left = sorted(k for k in tensors.tensors
                  if k not in used and not k.startswith("lm_head.") and not _is_ignored(k))
    if left:
        raise CheckpointError(f"{tensors.source}: tensors this Reformer has no place for: "
                              f"{', '.join(left[:5])}{' ...' if len(left) > 5 else ''}.")
    return backbone


def lm_head_from_hf(tensors):
    """(decoder [V, 2h], bias [V]) of the checkpoint's LM head, or None when
    it has none (a bare ReformerModel)."""
    if f"{_HEAD}.weight" not in tensors:
        return None
    weight = np.asarray(tensors[f"{_HEAD}.weight"])
    bias = tensors.get(f"{_HEAD}.bias", tensors.get("lm_head.bias"))
    bias = np.zeros(weight.shape[0], weight.dtype) if bias is None else np.asarray(bias)
    return weight, bias
