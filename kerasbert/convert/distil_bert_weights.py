"""keras-hub `DistilBertBackbone` <-> kerasbert `DistilBertBackbone`, through
the canonical BERT weight dict (kerasbert.convert.bert_weights).

A DistilBERT canonical dict is BERT's without `type_embeddings` and without
`pooler_*`. keras-hub's DistilBERT blocks are its `TransformerEncoder`, the
same as in its BERT, and use the erf GELU like ours, so both directions are
exact.
"""

import numpy as np

from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.bert_weights import set_bert_weights
from kerasbert.convert.keras_hub_bert import keras_hub_canonical_shape
from kerasbert.convert.keras_hub_bert import keras_hub_block_variables

CONFIG_KEYS = (
    "vocabulary_size",
    "num_layers",
    "num_heads",
    "hidden_dim",
    "intermediate_dim",
    "max_sequence_length",
    "dropout",
)


# --- keras-hub <-> canonical -------------------------------------------------


def _peer_top_variables(peer):
    return (
        ("word_embeddings", peer.embeddings.token_embedding.embeddings),
        (
            "position_embeddings",
            peer.embeddings.position_embedding.position_embeddings,
        ),
        ("embeddings_ln_gamma", peer.embeddings_layer_norm.gamma),
        ("embeddings_ln_beta", peer.embeddings_layer_norm.beta),
    )


def _require(peer, cls_name):
    import keras_hub

    if not isinstance(peer, getattr(keras_hub.models, cls_name)):
        raise TypeError(
            f"Expected a keras_hub.models.{cls_name}, got {type(peer).__name__}."
        )


def distil_bert_from_keras_hub(peer):
    """Converts a `keras_hub.models.DistilBertBackbone` into our
    `DistilBertBackbone` (same config, weights and dtype policy).

    keras-hub's inputs map to ours as token_ids -> input_word_ids,
    padding_mask -> input_mask; its single output is our
    `sequence_output`.
    """
    from kerasbert.models.distil_bert import DistilBertBackbone  # lazy: keras

    _require(peer, "DistilBertBackbone")
    hidden = peer.hidden_dim
    weights = {k: v.numpy() for k, v in _peer_top_variables(peer)}
    weights["layers"] = [
        {
            key: np.reshape(v.numpy(), keras_hub_canonical_shape(key, v, hidden))
            for key, v in keras_hub_block_variables(layer)
        }
        for layer in peer.transformer_layers
    ]
    ours = DistilBertBackbone(
        **{k: getattr(peer, k) for k in CONFIG_KEYS},
        dtype=peer.dtype_policy,
    )
    return set_bert_weights(ours, weights)


def distil_bert_to_keras_hub(ours):
    """Converts our `DistilBertBackbone` into a
    `keras_hub.models.DistilBertBackbone`. keras-hub fixes LayerNorm epsilon
    at 1e-12, so other values raise."""
    import keras_hub

    from kerasbert.models.distil_bert import DistilBertBackbone  # lazy: keras

    if not isinstance(ours, DistilBertBackbone):
        raise TypeError(
            f"Expected a kerasbert DistilBertBackbone, got {type(ours).__name__}."
        )
    if ours.layer_norm_epsilon != 1e-12:
        raise ValueError(
            "keras-hub's DistilBertBackbone uses layer_norm_epsilon=1e-12; "
            f"this backbone uses {ours.layer_norm_epsilon}."
        )
    weights = get_bert_weights(ours)
    peer = keras_hub.models.DistilBertBackbone(
        **{k: getattr(ours, k) for k in CONFIG_KEYS}, dtype=ours.dtype_policy
    )
    for key, variable in _peer_top_variables(peer):
        variable.assign(weights[key])
    for layer, src in zip(peer.transformer_layers, weights["layers"]):
        for key, variable in keras_hub_block_variables(layer):
            variable.assign(np.reshape(src[key], variable.shape))
    return peer
