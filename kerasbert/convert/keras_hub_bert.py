"""keras-hub's BERT layout, which its encoder families share (embeddings,
`TransformerEncoder` blocks with per-head attention kernels), and BERT's
own converters. Each family's `<family>_weights.py` builds on the variable
accessors here; `keras_hub.py` dispatches to the family.

keras-hub stores attention kernels per head ([H, N, D] and [N, D, H]) and
uses the tanh-approximate GELU; the converted model keeps that activation so
its outputs match keras-hub's exactly.
"""

import numpy as np

from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.bert_weights import set_bert_weights


def _require_keras_hub_bert(backbone):
    import keras_hub  # lazy: optional dependency

    if not isinstance(backbone, keras_hub.models.BertBackbone):
        raise TypeError(
            "from_keras_hub expects a keras_hub.models.BertBackbone, got "
            f"{type(backbone).__name__}."
        )


def keras_hub_top_variables(peer):
    """(canonical key, keras-hub variable) outside the encoder layers."""
    return (
        ("word_embeddings", peer.token_embedding.embeddings),
        ("position_embeddings", peer.position_embedding.position_embeddings),
        ("type_embeddings", peer.segment_embedding.embeddings),
        ("embeddings_ln_gamma", peer.embeddings_layer_norm.gamma),
        ("embeddings_ln_beta", peer.embeddings_layer_norm.beta),
        ("pooler_kernel", peer.pooled_dense.kernel),
        ("pooler_bias", peer.pooled_dense.bias),
    )


def keras_hub_block_variables(layer):
    """(canonical key, keras-hub variable) of one TransformerEncoder. The
    canonical shape is 2-D [in, out] / 1-D, so per-head tensors are
    reshaped on the way in and out."""
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


def keras_hub_canonical_shape(key, variable, hidden):
    """Only the per-head attention tensors differ from the canonical 2-D
    [in, out] / 1-D layout."""
    if key in ("query_kernel", "key_kernel", "value_kernel"):
        return (hidden, -1)  # [H, N, D] -> [H, N * D]
    if key == "attention_output_kernel":
        return (-1, hidden)  # [N, D, H] -> [N * D, H]
    if key in ("query_bias", "key_bias", "value_bias"):
        return (-1,)  # [N, D] -> [N * D]
    return tuple(variable.shape)


def keras_hub_to_canonical(backbone):
    """Reads a keras-hub BertBackbone into the canonical weight dict."""
    _require_keras_hub_bert(backbone)
    hidden = backbone.hidden_dim
    weights = {k: v.numpy() for k, v in keras_hub_top_variables(backbone)}
    weights["layers"] = [
        {
            key: np.reshape(v.numpy(), keras_hub_canonical_shape(key, v, hidden))
            for key, v in keras_hub_block_variables(layer)
        }
        for layer in backbone.transformer_layers
    ]
    return weights


def _config_of(backbone):
    keys = (
        "vocabulary_size", "num_layers", "num_heads", "hidden_dim",
        "intermediate_dim", "max_sequence_length", "num_segments", "dropout",
    )
    return {k: getattr(backbone, k) for k in keys}


def bert_from_keras_hub(backbone):
    """Converts a `keras_hub.models.BertBackbone` into a `BertBackbone`.

    Same architecture, same weights, same activation (tanh GELU): outputs
    agree to float32 rounding. keras-hub's input names map to ours as
    token_ids -> input_word_ids, padding_mask -> input_mask,
    segment_ids -> input_type_ids.
    """
    from kerasbert.models import BertBackbone  # lazy: keras

    weights = keras_hub_to_canonical(backbone)
    ours = BertBackbone(
        **_config_of(backbone),
        activation="gelu_approximate",
        dtype=backbone.dtype_policy,
    )
    return set_bert_weights(ours, weights)


def bert_to_keras_hub(backbone):
    """Converts our `BertBackbone` into a `keras_hub.models.BertBackbone`.

    keras-hub's BERT always uses the tanh GELU, so only backbones with
    `activation="gelu_approximate"` convert exactly; others raise.
    """
    import keras_hub

    if backbone.activation != "gelu_approximate":
        raise ValueError(
            "keras-hub's BertBackbone uses the tanh-approximate GELU; this "
            f"backbone uses {backbone.activation!r}, so its outputs would "
            "change. Convert only gelu_approximate backbones."
        )
    if backbone.embedding_dim not in (None, backbone.hidden_dim):
        raise ValueError("keras-hub's BertBackbone has no factorised embedding.")
    weights = get_bert_weights(backbone)
    peer = keras_hub.models.BertBackbone(
        **_config_of(backbone), dtype=backbone.dtype_policy
    )
    for key, variable in keras_hub_top_variables(peer):
        variable.assign(weights[key])
    for layer, src in zip(peer.transformer_layers, weights["layers"]):
        for key, variable in keras_hub_block_variables(layer):
            variable.assign(np.reshape(src[key], variable.shape))
    return peer
