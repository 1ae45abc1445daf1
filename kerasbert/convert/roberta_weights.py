"""RoBERTa weights: keras-hub `RobertaBackbone` <-> kerasbert
`RobertaBackbone`, and the original checkpoints' position tables.

The canonical dict is BERT's (see `bert_weights`) without
`type_embeddings` and without the pooler: RoBERTa has one segment type and
no trained pooler.

Position offset. fairseq (and Hugging Face, which copied it) computes
position ids as `padding_idx + 1 + i` for the i-th real token, with
padding_idx = 1, so real positions start at row 2 and the checkpoints'
tables have `max_sequence_length + 2` = 514 rows; rows 0 and 1 are never
used by a real token. Our table (and keras-hub's) starts at row 0, so
`load_position_embeddings` drops the first `POSITION_OFFSET` = 2 rows.
"""

import numpy as np

POSITION_OFFSET = 2  # padding_idx (1) + 1 in fairseq / Hugging Face.

_LAYER_KEYS = (
    "query_kernel", "query_bias", "key_kernel", "key_bias",
    "value_kernel", "value_bias",
    "attention_output_kernel", "attention_output_bias",
    "attention_ln_gamma", "attention_ln_beta",
    "intermediate_kernel", "intermediate_bias",
    "output_kernel", "output_bias", "output_ln_gamma", "output_ln_beta",
)


def load_position_embeddings(table, max_sequence_length=None):
    """An original (fairseq / Hugging Face layout) position table -> ours.

    Args:
        table: float array [P + 2, H], e.g. 514 rows of
            `roberta.embeddings.position_embeddings.weight`.
        max_sequence_length: optional P to check against (512).

    Returns:
        float array [P, H]: the rows of positions 0..P-1 (rows 2..P+1 of
        the original).
    """
    table = np.asarray(table)
    if table.ndim != 2 or table.shape[0] <= POSITION_OFFSET:
        raise ValueError(
            f"A RoBERTa position table is [max_sequence_length + "
            f"{POSITION_OFFSET}, hidden]; got shape {table.shape}."
        )
    rows = table[POSITION_OFFSET:]
    if max_sequence_length is not None and rows.shape[0] != max_sequence_length:
        raise ValueError(
            f"The position table has {table.shape[0]} rows = "
            f"{rows.shape[0]} positions + {POSITION_OFFSET} offset rows, "
            f"but max_sequence_length is {max_sequence_length}."
        )
    return rows


def save_position_embeddings(table):
    """Ours [P, H] -> the original layout [P + 2, H]. The two offset rows
    are never read by a real token; they are written as zeros (row 1 is the
    padding row, zero in the released checkpoints too)."""
    table = np.asarray(table)
    pad = np.zeros((POSITION_OFFSET, table.shape[1]), table.dtype)
    return np.concatenate([pad, table], axis=0)


# --- our backbone -------------------------------------------------------


def _assign(variable, value, name):
    value = np.asarray(value)
    if tuple(variable.shape) != value.shape:
        raise ValueError(
            f"Shape mismatch for {name}: the model has "
            f"{tuple(variable.shape)}, the source has {value.shape}."
        )
    variable.assign(value.astype(variable.dtype))


def _our_top(backbone):
    emb = backbone.embeddings
    return (
        ("word_embeddings", emb.token_embedding.embeddings),
        ("position_embeddings", emb.position_embedding.position_embeddings),
        ("embeddings_ln_gamma", emb.layer_norm.gamma),
        ("embeddings_ln_beta", emb.layer_norm.beta),
    )


def _our_block(block):
    """(key, variable) of one block except the fused query/key/value dense,
    which three canonical entries share."""
    attn = block.attention
    return (
        ("attention_output_kernel", attn.output_dense.kernel),
        ("attention_output_bias", attn.output_dense.bias),
        ("attention_ln_gamma", block.attention_layer_norm.gamma),
        ("attention_ln_beta", block.attention_layer_norm.beta),
        ("intermediate_kernel", block.intermediate_dense.kernel),
        ("intermediate_bias", block.intermediate_dense.bias),
        ("output_kernel", block.output_dense.kernel),
        ("output_bias", block.output_dense.bias),
        ("output_ln_gamma", block.output_layer_norm.gamma),
        ("output_ln_beta", block.output_layer_norm.beta),
    )


def get_roberta_weights(backbone):
    """Reads our `RobertaBackbone` into the canonical dict (numpy)."""
    weights = {key: v.numpy() for key, v in _our_top(backbone)}
    weights["layers"] = []
    for block in backbone.transformer_layers:
        layer = {key: v.numpy() for key, v in _our_block(block)}
        qkv = block.attention.qkv_dense
        kernels = np.split(qkv.kernel.numpy(), 3, axis=-1)
        biases = np.split(qkv.bias.numpy(), 3, axis=-1)
        for part, kernel, bias in zip(("query", "key", "value"), kernels, biases):
            layer[f"{part}_kernel"], layer[f"{part}_bias"] = kernel, bias
        weights["layers"].append(layer)
    return weights


def set_roberta_weights(backbone, weights):
    """Writes the canonical dict into our `RobertaBackbone`. Position rows
    are ours (no offset); use `load_position_embeddings` on original
    tables first."""
    if len(weights["layers"]) != len(backbone.transformer_layers):
        raise ValueError(
            f"The source has {len(weights['layers'])} layers, the model "
            f"{len(backbone.transformer_layers)}."
        )
    for key, variable in _our_top(backbone):
        _assign(variable, weights[key], key)
    for i, (block, src) in enumerate(
        zip(backbone.transformer_layers, weights["layers"])
    ):
        qkv = block.attention.qkv_dense
        parts = ("query", "key", "value")
        _assign(
            qkv.kernel,
            np.concatenate([src[f"{p}_kernel"] for p in parts], axis=-1),
            f"layer {i} query/key/value kernels",
        )
        _assign(
            qkv.bias,
            np.concatenate([src[f"{p}_bias"] for p in parts]),
            f"layer {i} query/key/value biases",
        )
        for key, variable in _our_block(block):
            _assign(variable, src[key], f"layer {i} {key}")
    return backbone


# --- keras-hub ------------------------------------------------------------


def _peer_top(peer):
    return (
        ("word_embeddings", peer.token_embedding.embeddings),
        (
            "position_embeddings",
            peer.embeddings.position_embedding.position_embeddings,
        ),
        ("embeddings_ln_gamma", peer.embeddings_layer_norm.gamma),
        ("embeddings_ln_beta", peer.embeddings_layer_norm.beta),
    )


def _peer_layer(layer):
    """keras-hub's TransformerEncoder keeps attention kernels per head:
    [H, N, D] for query/key/value, [N, D, H] for the output."""
    attn = layer._self_attention_layer
    return (
        ("query_kernel", attn._query_dense.kernel),
        ("query_bias", attn._query_dense.bias),
        ("key_kernel", attn._key_dense.kernel),
        ("key_bias", attn._key_dense.bias),
        ("value_kernel", attn._value_dense.kernel),
        ("value_bias", attn._value_dense.bias),
        ("attention_output_kernel", attn._output_dense.kernel),
        ("attention_output_bias", attn._output_dense.bias),
        ("attention_ln_gamma", layer._self_attention_layer_norm.gamma),
        ("attention_ln_beta", layer._self_attention_layer_norm.beta),
        ("intermediate_kernel", layer._feedforward_intermediate_dense.kernel),
        ("intermediate_bias", layer._feedforward_intermediate_dense.bias),
        ("output_kernel", layer._feedforward_output_dense.kernel),
        ("output_bias", layer._feedforward_output_dense.bias),
        ("output_ln_gamma", layer._feedforward_layer_norm.gamma),
        ("output_ln_beta", layer._feedforward_layer_norm.beta),
    )


def _canonical(key, value, hidden):
    if key in ("query_kernel", "key_kernel", "value_kernel"):
        return np.reshape(value, (hidden, -1))  # [H, N, D] -> [H, N*D]
    if key == "attention_output_kernel":
        return np.reshape(value, (-1, hidden))  # [N, D, H] -> [N*D, H]
    if key in ("query_bias", "key_bias", "value_bias"):
        return np.reshape(value, (-1,))  # [N, D] -> [N*D]
    return value


def _config_of(backbone):
    keys = (
        "vocabulary_size", "num_layers", "num_heads", "hidden_dim",
        "intermediate_dim", "max_sequence_length", "dropout",
    )
    return {k: getattr(backbone, k) for k in keys}


def roberta_from_keras_hub(peer):
    """Converts a `keras_hub.models.RobertaBackbone` into ours.

    Same architecture, weights and activation (erf GELU, LayerNorm eps
    1e-5): outputs agree to float32 rounding. keras-hub's inputs map to ours
    as token_ids -> input_word_ids, padding_mask -> input_mask (pass zeros
    as input_type_ids); its single output is our `sequence_output`.
    """
    import keras_hub

    from kerasbert.models.roberta import RobertaBackbone

    if not isinstance(peer, keras_hub.models.RobertaBackbone):
        raise TypeError(
            "roberta_from_keras_hub expects a keras_hub.models."
            f"RobertaBackbone, got {type(peer).__name__}."
        )
    hidden = peer.hidden_dim
    weights = {k: v.numpy() for k, v in _peer_top(peer)}
    weights["layers"] = [
        {k: _canonical(k, v.numpy(), hidden) for k, v in _peer_layer(layer)}
        for layer in peer.transformer_layers
    ]
    ours = RobertaBackbone(**_config_of(peer), dtype=peer.dtype_policy)
    return set_roberta_weights(ours, weights)


def roberta_to_keras_hub(ours):
    """Converts our `RobertaBackbone` into a `keras_hub.models.
    RobertaBackbone`. keras-hub fixes LayerNorm epsilon at 1e-5, so other
    values raise rather than convert inexactly."""
    import keras_hub

    if ours.layer_norm_epsilon != 1e-5:
        raise ValueError(
            "keras-hub's RobertaBackbone uses layer_norm_epsilon=1e-5; this "
            f"backbone uses {ours.layer_norm_epsilon}, so its outputs would "
            "change."
        )
    weights = get_roberta_weights(ours)
    peer = keras_hub.models.RobertaBackbone(
        **_config_of(ours), dtype=ours.dtype_policy
    )
    for key, variable in _peer_top(peer):
        _assign(variable, weights[key], key)
    for i, (layer, src) in enumerate(zip(peer.transformer_layers, weights["layers"])):
        for key, variable in _peer_layer(layer):
            _assign(
                variable,
                np.reshape(src[key], variable.shape),
                f"layer {i} {key}",
            )
    return peer
