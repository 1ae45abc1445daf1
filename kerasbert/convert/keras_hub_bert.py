"""keras-hub `BertBackbone` <-> ours. Where keras-hub keeps each weight:
`keras_hub_layout.py`; `keras_hub.py` dispatches to the family.

keras-hub's BERT uses the tanh-approximate GELU; the converted model keeps
that activation so its outputs match keras-hub's exactly.
"""

from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.bert_weights import set_bert_weights
from kerasbert.convert.keras_hub_layout import read_keras_hub
from kerasbert.convert.keras_hub_layout import require_exact
from kerasbert.convert.keras_hub_layout import write_keras_hub


def keras_hub_to_canonical(backbone):
    """Reads a keras-hub BertBackbone into the canonical weight dict."""
    return read_keras_hub(backbone, "BertBackbone")


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

    What keras-hub fixes in code (activation, LayerNorm epsilon) must match:
    `require_exact` raises otherwise.
    """
    import keras_hub

    require_exact(backbone, "BertBackbone")
    if backbone.embedding_dim not in (None, backbone.hidden_dim):
        raise ValueError("keras-hub's BertBackbone has no factorised embedding.")
    peer = keras_hub.models.BertBackbone(**_config_of(backbone), dtype=backbone.dtype_policy)
    return write_keras_hub(peer, "BertBackbone", get_bert_weights(backbone))
