"""The canonical BERT weight dict, and the one mapping of it onto ours.

Every converter goes through this format: a peer's layout is translated into
(or out of) the canonical dict in that peer's module, and only this module
knows where each tensor lives inside `BertBackbone`. The canonical layout is
the original BERT's: 2-D dense kernels [in, out], head-major columns.

    {
      "word_embeddings": [V, E], "position_embeddings": [P, E],
      "type_embeddings": [S, E],
      "embeddings_ln_gamma": [E], "embeddings_ln_beta": [E],
      "embedding_projection_kernel": [E, H],  # only when E != H
      "embedding_projection_bias": [H],
      "layers": [  # one dict per layer
        {"query_kernel": [H, H], "query_bias": [H],
         "key_kernel", "key_bias", "value_kernel", "value_bias",
         "attention_output_kernel": [H, H], "attention_output_bias": [H],
         "attention_ln_gamma", "attention_ln_beta",
         "intermediate_kernel": [H, I], "intermediate_bias": [I],
         "output_kernel": [I, H], "output_bias": [H],
         "output_ln_gamma", "output_ln_beta"},
      ],
      "pooler_kernel": [H, H], "pooler_bias": [H],
    }
"""

import numpy as np

LAYER_KEYS = (
    "query_kernel",
    "query_bias",
    "key_kernel",
    "key_bias",
    "value_kernel",
    "value_bias",
    "attention_output_kernel",
    "attention_output_bias",
    "attention_ln_gamma",
    "attention_ln_beta",
    "intermediate_kernel",
    "intermediate_bias",
    "output_kernel",
    "output_bias",
    "output_ln_gamma",
    "output_ln_beta",
)


def _assign(variable, value, name):
    value = np.asarray(value)
    if tuple(variable.shape) != value.shape:
        raise ValueError(
            f"Shape mismatch for {name}: the model has "
            f"{tuple(variable.shape)}, the source has {value.shape}."
        )
    variable.assign(value.astype(variable.dtype))


def get_bert_weights(backbone):
    """Reads a `BertBackbone`'s weights into the canonical dict (numpy)."""
    emb = backbone.embeddings
    weights = {
        "word_embeddings": emb.token_embedding.embeddings.numpy(),
        "position_embeddings": emb.position_embedding.position_embeddings.numpy(),
        "type_embeddings": (
            emb.segment_embedding.embeddings.numpy()
            if emb.segment_embedding is not None
            else None
        ),
        "embeddings_ln_gamma": emb.layer_norm.gamma.numpy(),
        "embeddings_ln_beta": emb.layer_norm.beta.numpy(),
        "pooler_kernel": backbone.pooler.dense.kernel.numpy(),
        "pooler_bias": backbone.pooler.dense.bias.numpy(),
        "layers": [],
    }
    if emb.projection is not None:
        weights["embedding_projection_kernel"] = emb.projection.kernel.numpy()
        weights["embedding_projection_bias"] = emb.projection.bias.numpy()
    for block in backbone.transformer_layers:
        attn = block.attention
        q, k, v = np.split(attn.qkv_dense.kernel.numpy(), 3, axis=-1)
        qb, kb, vb = np.split(attn.qkv_dense.bias.numpy(), 3, axis=-1)
        weights["layers"].append(
            {
                "query_kernel": q,
                "query_bias": qb,
                "key_kernel": k,
                "key_bias": kb,
                "value_kernel": v,
                "value_bias": vb,
                "attention_output_kernel": attn.output_dense.kernel.numpy(),
                "attention_output_bias": attn.output_dense.bias.numpy(),
                "attention_ln_gamma": block.attention_layer_norm.gamma.numpy(),
                "attention_ln_beta": block.attention_layer_norm.beta.numpy(),
                "intermediate_kernel": block.intermediate_dense.kernel.numpy(),
                "intermediate_bias": block.intermediate_dense.bias.numpy(),
                "output_kernel": block.output_dense.kernel.numpy(),
                "output_bias": block.output_dense.bias.numpy(),
                "output_ln_gamma": block.output_layer_norm.gamma.numpy(),
                "output_ln_beta": block.output_layer_norm.beta.numpy(),
            }
        )
    return weights


def set_bert_weights(backbone, weights):
    """Writes the canonical dict into a `BertBackbone` of matching shape."""
    emb = backbone.embeddings
    if len(weights["layers"]) != len(backbone.transformer_layers):
        raise ValueError(
            f"The source has {len(weights['layers'])} layers, the model "
            f"{len(backbone.transformer_layers)}."
        )
    _assign(emb.token_embedding.embeddings, weights["word_embeddings"],
            "word_embeddings")
    _assign(emb.position_embedding.position_embeddings,
            weights["position_embeddings"], "position_embeddings")
    if emb.segment_embedding is not None:
        _assign(emb.segment_embedding.embeddings, weights["type_embeddings"],
                "type_embeddings")
    _assign(emb.layer_norm.gamma, weights["embeddings_ln_gamma"],
            "embeddings_ln_gamma")
    _assign(emb.layer_norm.beta, weights["embeddings_ln_beta"],
            "embeddings_ln_beta")
    if emb.projection is not None:
        _assign(emb.projection.kernel, weights["embedding_projection_kernel"],
                "embedding_projection_kernel")
        _assign(emb.projection.bias, weights["embedding_projection_bias"],
                "embedding_projection_bias")
    for i, (block, src) in enumerate(
        zip(backbone.transformer_layers, weights["layers"])
    ):
        attn = block.attention
        where = f"layer {i}"
        _assign(
            attn.qkv_dense.kernel,
            np.concatenate(
                [src["query_kernel"], src["key_kernel"], src["value_kernel"]],
                axis=-1,
            ),
            f"{where} query/key/value kernels",
        )
        _assign(
            attn.qkv_dense.bias,
            np.concatenate(
                [src["query_bias"], src["key_bias"], src["value_bias"]]
            ),
            f"{where} query/key/value biases",
        )
        pairs = (
            (attn.output_dense.kernel, "attention_output_kernel"),
            (attn.output_dense.bias, "attention_output_bias"),
            (block.attention_layer_norm.gamma, "attention_ln_gamma"),
            (block.attention_layer_norm.beta, "attention_ln_beta"),
            (block.intermediate_dense.kernel, "intermediate_kernel"),
            (block.intermediate_dense.bias, "intermediate_bias"),
            (block.output_dense.kernel, "output_kernel"),
            (block.output_dense.bias, "output_bias"),
            (block.output_layer_norm.gamma, "output_ln_gamma"),
            (block.output_layer_norm.beta, "output_ln_beta"),
        )
        for variable, key in pairs:
            _assign(variable, src[key], f"{where} {key}")
    _assign(backbone.pooler.dense.kernel, weights["pooler_kernel"],
            "pooler_kernel")
    _assign(backbone.pooler.dense.bias, weights["pooler_bias"], "pooler_bias")
    return backbone
