"""keras-hub `BertBackbone` <-> kerasbert `BertBackbone`.

keras-hub stores attention kernels per head ([H, N, D] and [N, D, H]) and
uses the tanh-approximate GELU; the converted model keeps that activation so
its outputs match keras-hub's exactly.
"""

import numpy as np

from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.bert_weights import set_bert_weights


def _require_keras_hub_bert(backbone):
    import keras_hub

    if not isinstance(backbone, keras_hub.models.BertBackbone):
        raise TypeError(
            "from_keras_hub expects a keras_hub.models.BertBackbone, got "
            f"{type(backbone).__name__}."
        )


def keras_hub_to_canonical(backbone):
    """Reads a keras-hub BertBackbone into the canonical weight dict."""
    _require_keras_hub_bert(backbone)
    hidden = backbone.hidden_dim

    def kernel(dense):  # [H, N, D] -> [H, N * D]
        return np.reshape(dense.kernel.numpy(), (hidden, -1))

    def bias(dense):  # [N, D] -> [N * D]
        return np.reshape(dense.bias.numpy(), (-1,))

    weights = {
        "word_embeddings": backbone.token_embedding.embeddings.numpy(),
        "position_embeddings": (
            backbone.position_embedding.position_embeddings.numpy()
        ),
        "type_embeddings": backbone.segment_embedding.embeddings.numpy(),
        "embeddings_ln_gamma": backbone.embeddings_layer_norm.gamma.numpy(),
        "embeddings_ln_beta": backbone.embeddings_layer_norm.beta.numpy(),
        "pooler_kernel": backbone.pooled_dense.kernel.numpy(),
        "pooler_bias": backbone.pooled_dense.bias.numpy(),
        "layers": [],
    }
    for layer in backbone.transformer_layers:
        attn = layer._self_attention_layer
        out = attn._output_dense
        weights["layers"].append(
            {
                "query_kernel": kernel(attn._query_dense),
                "query_bias": bias(attn._query_dense),
                "key_kernel": kernel(attn._key_dense),
                "key_bias": bias(attn._key_dense),
                "value_kernel": kernel(attn._value_dense),
                "value_bias": bias(attn._value_dense),
                "attention_output_kernel": np.reshape(
                    out.kernel.numpy(), (-1, hidden)
                ),
                "attention_output_bias": out.bias.numpy(),
                "attention_ln_gamma": layer._self_attention_layer_norm.gamma.numpy(),
                "attention_ln_beta": layer._self_attention_layer_norm.beta.numpy(),
                "intermediate_kernel": layer._feedforward_intermediate_dense.kernel.numpy(),
                "intermediate_bias": layer._feedforward_intermediate_dense.bias.numpy(),
                "output_kernel": layer._feedforward_output_dense.kernel.numpy(),
                "output_bias": layer._feedforward_output_dense.bias.numpy(),
                "output_ln_gamma": layer._feedforward_layer_norm.gamma.numpy(),
                "output_ln_beta": layer._feedforward_layer_norm.beta.numpy(),
            }
        )
    return weights


def from_keras_hub(backbone):
    """Converts a `keras_hub.models.BertBackbone` into a `BertBackbone`.

    Same architecture, same weights, same activation (tanh GELU): outputs
    agree to float32 rounding. keras-hub's input names map to ours as
    token_ids -> input_word_ids, padding_mask -> input_mask,
    segment_ids -> input_type_ids.
    """
    from kerasbert.models import BertBackbone

    weights = keras_hub_to_canonical(backbone)
    ours = BertBackbone(
        vocabulary_size=backbone.vocabulary_size,
        num_layers=backbone.num_layers,
        num_heads=backbone.num_heads,
        hidden_dim=backbone.hidden_dim,
        intermediate_dim=backbone.intermediate_dim,
        max_sequence_length=backbone.max_sequence_length,
        num_segments=backbone.num_segments,
        dropout=backbone.dropout,
        activation="gelu_approximate",
        dtype=backbone.dtype_policy,
    )
    return set_bert_weights(ours, weights)


def to_keras_hub(backbone):
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
        vocabulary_size=backbone.vocabulary_size,
        num_layers=backbone.num_layers,
        num_heads=backbone.num_heads,
        hidden_dim=backbone.hidden_dim,
        intermediate_dim=backbone.intermediate_dim,
        max_sequence_length=backbone.max_sequence_length,
        num_segments=backbone.num_segments,
        dropout=backbone.dropout,
        dtype=backbone.dtype_policy,
    )
    heads, head_dim = backbone.num_heads, backbone.hidden_dim // backbone.num_heads
    hidden = backbone.hidden_dim
    peer.token_embedding.embeddings.assign(weights["word_embeddings"])
    peer.position_embedding.position_embeddings.assign(
        weights["position_embeddings"]
    )
    peer.segment_embedding.embeddings.assign(weights["type_embeddings"])
    peer.embeddings_layer_norm.gamma.assign(weights["embeddings_ln_gamma"])
    peer.embeddings_layer_norm.beta.assign(weights["embeddings_ln_beta"])
    for layer, src in zip(peer.transformer_layers, weights["layers"]):
        attn = layer._self_attention_layer
        for name, dense in (
            ("query", attn._query_dense),
            ("key", attn._key_dense),
            ("value", attn._value_dense),
        ):
            dense.kernel.assign(
                src[f"{name}_kernel"].reshape(hidden, heads, head_dim)
            )
            dense.bias.assign(src[f"{name}_bias"].reshape(heads, head_dim))
        attn._output_dense.kernel.assign(
            src["attention_output_kernel"].reshape(heads, head_dim, hidden)
        )
        attn._output_dense.bias.assign(src["attention_output_bias"])
        layer._self_attention_layer_norm.gamma.assign(src["attention_ln_gamma"])
        layer._self_attention_layer_norm.beta.assign(src["attention_ln_beta"])
        layer._feedforward_intermediate_dense.kernel.assign(
            src["intermediate_kernel"]
        )
        layer._feedforward_intermediate_dense.bias.assign(src["intermediate_bias"])
        layer._feedforward_output_dense.kernel.assign(src["output_kernel"])
        layer._feedforward_output_dense.bias.assign(src["output_bias"])
        layer._feedforward_layer_norm.gamma.assign(src["output_ln_gamma"])
        layer._feedforward_layer_norm.beta.assign(src["output_ln_beta"])
    peer.pooled_dense.kernel.assign(weights["pooler_kernel"])
    peer.pooled_dense.bias.assign(weights["pooler_bias"])
    return peer
