"""ALBERT weights: keras-hub `AlbertBackbone` <-> ours, Model Garden
`AlbertEncoder` -> ours.

The canonical ALBERT dict is the canonical BERT dict (`bert_weights`) with
the per-layer list replaced by the distinct, shared blocks:

    {
      "word_embeddings": [V, E], "position_embeddings": [P, E],
      "type_embeddings": [S, E], "embeddings_ln_gamma": [E],
      "embeddings_ln_beta": [E],
      "embedding_projection_kernel": [E, H], "embedding_projection_bias": [H],
      "groups": [  # num_groups lists of num_inner_repetitions block dicts
        [{"query_kernel": [H, H], ...}],  # keys: bert_weights.LAYER_KEYS
      ],
      "pooler_kernel": [H, H], "pooler_bias": [H],
    }

Writing into our `AlbertBackbone` expands the groups to the block
applications in call order and goes through `set_bert_weights`, so where
each tensor lives inside our layers is still known in one place only.
"""

import numpy as np

from kerasbert.convert.bert_weights import LAYER_KEYS
from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.bert_weights import set_bert_weights
from kerasbert.convert.keras_hub_layout import read_keras_hub
from kerasbert.convert.keras_hub_layout import require_exact
from kerasbert.convert.keras_hub_layout import write_keras_hub
from kerasbert.convert.tf_models import detect_activation

# Constructor arguments that keras-hub's AlbertBackbone shares with ours.
_KERAS_HUB_CONFIG = (
    "vocabulary_size",
    "num_layers",
    "num_heads",
    "embedding_dim",
    "hidden_dim",
    "intermediate_dim",
    "num_groups",
    "num_inner_repetitions",
    "dropout",
    "max_sequence_length",
    "num_segments",
)


# --- our AlbertBackbone <-> canonical ---------------------------------------


def get_albert_weights(backbone):
    """Reads our `AlbertBackbone` into the canonical ALBERT dict (numpy)."""
    weights = get_bert_weights(backbone)
    per_application = weights.pop("layers")
    # transformer_layers lists every application; keep each block's first.
    first = {}
    for block, layer in zip(backbone.transformer_layers, per_application):
        first.setdefault(id(block), layer)
    weights["groups"] = [
        [first[id(block)] for block in group] for group in backbone.groups
    ]
    return weights


def set_albert_weights(backbone, weights):
    """Writes the canonical ALBERT dict into our `AlbertBackbone`."""
    groups = weights["groups"]
    shape = [len(group) for group in groups]
    expected = [len(group) for group in backbone.groups]
    if shape != expected:
        raise ValueError(
            f"The source has groups of {shape} blocks, the model {expected} "
            "(num_groups x num_inner_repetitions)."
        )
    index = {
        id(block): layer
        for group, src in zip(backbone.groups, groups)
        for block, layer in zip(group, src)
    }
    expanded = dict(weights)
    del expanded["groups"]
    expanded["layers"] = [index[id(b)] for b in backbone.transformer_layers]
    return set_bert_weights(backbone, expanded)


# --- keras-hub --------------------------------------------------------------


def keras_hub_albert_to_canonical(peer):
    """Reads a keras-hub AlbertBackbone into the canonical ALBERT dict
    (its `transformer_layers` are already [group][inner] distinct blocks)."""
    return read_keras_hub(peer, "AlbertBackbone")


def albert_from_keras_hub(peer):
    """Converts a `keras_hub.models.AlbertBackbone` into our `AlbertBackbone`.

    Same architecture, weights and activation (tanh GELU), so outputs agree
    to float32 rounding. Inputs map token_ids -> input_word_ids,
    padding_mask -> input_mask, segment_ids -> input_type_ids; ours also
    returns `encoder_outputs`.
    """
    from kerasbert.models import AlbertBackbone  # lazy: keras

    weights = keras_hub_albert_to_canonical(peer)
    if peer.embedding_dim == peer.hidden_dim:
        # keras-hub projects even then; our embeddings skip an E == H
        # projection, so there is nowhere to put the [H, H] kernel.
        raise ValueError(
            f"keras-hub AlbertBackbone has embedding_dim == hidden_dim "
            f"({peer.hidden_dim}); only factorised embeddings convert."
        )
    ours = AlbertBackbone(
        **{k: getattr(peer, k) for k in _KERAS_HUB_CONFIG},
        activation="gelu_approximate",
        dtype=peer.dtype_policy,
    )
    return set_albert_weights(ours, weights)


def albert_to_keras_hub(ours):
    """Converts our `AlbertBackbone` into a `keras_hub.models.AlbertBackbone`.

    What keras-hub fixes in code (activation, LayerNorm epsilon) must match:
    `require_exact` raises otherwise.
    """
    import keras_hub

    require_exact(ours, "AlbertBackbone")
    if ours.embeddings.projection is None:
        raise ValueError(
            f"This backbone has embedding_dim == hidden_dim ({ours.hidden_dim}) "
            "and no embedding projection; keras-hub's AlbertBackbone always has "
            "one."
        )
    weights = get_albert_weights(ours)
    peer = keras_hub.models.AlbertBackbone(
        **{k: getattr(ours, k) for k in _KERAS_HUB_CONFIG},
        dtype=ours.dtype_policy,
    )
    return write_keras_hub(peer, "AlbertBackbone", weights)


# --- tf-models-official -----------------------------------------------------


def _tf_models_block_to_canonical(block, hidden):
    """One Model Garden TransformerEncoderBlock -> canonical block dict."""
    attn = block._attention_layer

    def heads_in(dense):  # kernel [H, N, D] -> [H, N*D], bias [N, D] -> [N*D]
        return (
            np.reshape(dense.kernel.numpy(), (hidden, -1)),
            np.reshape(dense.bias.numpy(), (-1,)),
        )

    layer = {}
    for part in ("query", "key", "value"):
        kernel, bias = heads_in(getattr(attn, f"_{part}_dense"))
        layer[f"{part}_kernel"], layer[f"{part}_bias"] = kernel, bias
    out = attn._output_dense
    layer.update(
        {
            # [N, D, H] -> [N*D, H]: rows head-major, like the columns above.
            "attention_output_kernel": np.reshape(out.kernel.numpy(), (-1, hidden)),
            "attention_output_bias": out.bias.numpy(),
            "attention_ln_gamma": block._attention_layer_norm.gamma.numpy(),
            "attention_ln_beta": block._attention_layer_norm.beta.numpy(),
            "intermediate_kernel": block._intermediate_dense.kernel.numpy(),
            "intermediate_bias": block._intermediate_dense.bias.numpy(),
            "output_kernel": block._output_dense.kernel.numpy(),
            "output_bias": block._output_dense.bias.numpy(),
            "output_ln_gamma": block._output_layer_norm.gamma.numpy(),
            "output_ln_beta": block._output_layer_norm.beta.numpy(),
        }
    )
    assert set(layer) == set(LAYER_KEYS)
    return layer


def _find_layer(encoder, name):
    try:
        return encoder.get_layer(name)
    except ValueError:
        return None


def tf_models_albert_to_canonical(encoder):
    """Reads a Model Garden AlbertEncoder into the canonical ALBERT dict.

    The encoder's sublayers are found by the names AlbertEncoder gives them
    (word_embeddings, type_embeddings, embeddings/layer_norm,
    embedding_projection, transformer, pooler_transform).
    """
    pooler = encoder.get_layer("pooler_transform")
    hidden = pooler.kernel.shape[-1]
    norm = encoder.get_layer("embeddings/layer_norm")
    weights = {
        "word_embeddings": encoder.get_embedding_table().numpy(),
        "position_embeddings": (
            encoder._position_embedding_layer._position_embeddings.numpy()
        ),
        "type_embeddings": encoder.get_layer("type_embeddings").embeddings.numpy(),
        "embeddings_ln_gamma": norm.gamma.numpy(),
        "embeddings_ln_beta": norm.beta.numpy(),
        "pooler_kernel": pooler.kernel.numpy(),
        "pooler_bias": pooler.bias.numpy(),
    }
    projection = _find_layer(encoder, "embedding_projection")
    if projection is not None:  # Only when embedding_width != hidden_size.
        weights["embedding_projection_kernel"] = projection.kernel.numpy()
        weights["embedding_projection_bias"] = projection.bias.numpy()
    block = encoder.get_layer("transformer")
    weights["groups"] = [[_tf_models_block_to_canonical(block, hidden)]]
    return weights


def albert_from_tf_models(encoder):
    """Converts a Model Garden `official.nlp.modeling.networks.AlbertEncoder`
    into our `AlbertBackbone`.

    AlbertEncoder shares one block across all layers (our num_groups=1,
    num_inner_repetitions=1). Sizes come from the variables' shapes; the
    activation is detected from the block's function (Model Garden's
    default is the tanh GELU); the dropout rate from the config.

    Raises:
        TypeError: not an AlbertEncoder.
        ValueError: embedding_width equal to hidden_size (no projection to
            convert; build a BertBackbone instead) or an activation we cannot
            reproduce.
    """
    from official.nlp.modeling import networks

    from kerasbert.models import AlbertBackbone  # lazy: keras

    if not isinstance(encoder, networks.AlbertEncoder):
        raise TypeError(
            "albert_from_tf_models expects official.nlp.modeling.networks."
            f"AlbertEncoder, got {type(encoder).__name__}."
        )
    weights = tf_models_albert_to_canonical(encoder)
    if "embedding_projection_kernel" not in weights:
        raise ValueError(
            "AlbertEncoder has embedding_width == hidden_size (no embedding "
            "projection); AlbertBackbone always factorises the embedding."
        )
    block = encoder.get_layer("transformer")
    config = encoder.get_config()
    vocab, width = weights["word_embeddings"].shape
    hidden = weights["pooler_kernel"].shape[-1]
    ours = AlbertBackbone(
        vocabulary_size=vocab,
        num_layers=config["num_layers"],
        num_heads=config["num_attention_heads"],
        hidden_dim=hidden,
        intermediate_dim=weights["groups"][0][0]["intermediate_kernel"].shape[-1],
        embedding_dim=width,
        max_sequence_length=weights["position_embeddings"].shape[0],
        num_segments=weights["type_embeddings"].shape[0],
        dropout=config.get("dropout_rate", 0.0),
        activation=detect_activation(block._intermediate_activation_layer.activation),
    )
    return set_albert_weights(ours, weights)
