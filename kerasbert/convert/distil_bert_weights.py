"""keras-hub `DistilBertBackbone` <-> kerasbert `DistilBertBackbone`, through
the canonical BERT weight dict (kerasbert.convert.bert_weights).

A DistilBERT canonical dict is BERT's without `type_embeddings` and without
`pooler_*`. keras-hub's DistilBERT blocks are its `TransformerEncoder`, the
same as in its BERT, and use the erf GELU like ours, so both directions are
exact.
"""


from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.bert_weights import set_bert_weights
from kerasbert.convert.keras_hub_layout import read_keras_hub
from kerasbert.convert.keras_hub_layout import require_exact
from kerasbert.convert.keras_hub_layout import write_keras_hub

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


def distil_bert_from_keras_hub(peer):
    """Converts a `keras_hub.models.DistilBertBackbone` into our
    `DistilBertBackbone` (same config, weights and dtype policy).

    keras-hub's inputs map to ours as token_ids -> input_word_ids,
    padding_mask -> input_mask; its single output is our
    `sequence_output`.
    """
    from kerasbert.models.distil_bert import DistilBertBackbone  # lazy: keras

    weights = read_keras_hub(peer, "DistilBertBackbone")
    ours = DistilBertBackbone(
        **{k: getattr(peer, k) for k in CONFIG_KEYS},
        dtype=peer.dtype_policy,
    )
    return set_bert_weights(ours, weights)


def distil_bert_to_keras_hub(ours):
    """Converts our `DistilBertBackbone` into a
    `keras_hub.models.DistilBertBackbone`. What keras-hub fixes in code
    (activation, LayerNorm epsilon) must match: `require_exact` raises
    otherwise."""
    import keras_hub

    from kerasbert.models.distil_bert import DistilBertBackbone  # lazy: keras

    if not isinstance(ours, DistilBertBackbone):
        raise TypeError(
            f"Expected a kerasbert DistilBertBackbone, got {type(ours).__name__}."
        )
    require_exact(ours, "DistilBertBackbone")
    weights = get_bert_weights(ours)
    peer = keras_hub.models.DistilBertBackbone(
        **{k: getattr(ours, k) for k in CONFIG_KEYS}, dtype=ours.dtype_policy
    )
    return write_keras_hub(peer, "DistilBertBackbone", weights)
