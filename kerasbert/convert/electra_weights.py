"""ELECTRA weights: keras-hub `ElectraBackbone` <-> ours, Model Garden
`BertEncoder` (an ELECTRA discriminator encoder) -> ours.

The canonical dict is BERT's (`bert_weights`), with the factorised
embedding's `embedding_projection_kernel` [E, H] / `_bias` [H] only when
embedding_dim != hidden_dim (ELECTRA-Small). Our discriminator keeps that
projection inside its `BertEmbeddings`, exactly where BERT's mapping looks,
so reading and writing go through `get_bert_weights` / `set_bert_weights`.
A generator that shares a discriminator's embeddings reads the shared tables
and its OWN projection (`embeddings_projection`); it can be read, but not
written (that would overwrite the discriminator's tables).
"""


from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.bert_weights import set_bert_weights
from kerasbert.convert.keras_hub_layout import read_keras_hub
from kerasbert.convert.keras_hub_layout import require_exact
from kerasbert.convert.keras_hub_layout import write_keras_hub
from kerasbert.convert.tf_models import from_tf_models

_PROJECTION = ("embedding_projection_kernel", "embedding_projection_bias")
# keras-hub ElectraBackbone argument -> ours (its vocabulary is `vocab_size`).
_KERAS_HUB_CONFIG = {
    "vocab_size": "vocabulary_size",
    "num_layers": "num_layers",
    "num_heads": "num_heads",
    "hidden_dim": "hidden_dim",
    "intermediate_dim": "intermediate_dim",
    "dropout": "dropout",
    "max_sequence_length": "max_sequence_length",
    "num_segments": "num_segments",
}


# --- our ElectraBackbone <-> canonical -------------------------------------


def get_electra_weights(backbone):
    """Reads an `ElectraBackbone` (discriminator or generator) into the
    canonical dict (numpy)."""
    weights = get_bert_weights(backbone)
    if backbone.shares_embeddings:
        # The shared BertEmbeddings' projection is the owner's; ours is
        # `embeddings_projection` (None when embedding_dim == hidden_dim).
        for key in _PROJECTION:
            weights.pop(key, None)
        own = backbone.embeddings_projection
        if own is not None:
            weights[_PROJECTION[0]] = own.kernel.numpy()
            weights[_PROJECTION[1]] = own.bias.numpy()
    return weights


def set_electra_weights(backbone, weights):
    """Writes the canonical dict into an `ElectraBackbone` that owns its
    embeddings (a discriminator); returns it."""
    if backbone.shares_embeddings:
        raise ValueError(
            "This ElectraBackbone shares another encoder's embeddings (an "
            "ELECTRA generator); writing would overwrite the owner's tables. "
            "Write the discriminator, or load the whole ElectraPretrainer."
        )
    return set_bert_weights(backbone, weights)


# --- keras-hub --------------------------------------------------------------


def keras_hub_electra_to_canonical(peer):
    """Reads a keras-hub ElectraBackbone into the canonical dict (with the
    projection where keras-hub has one: only when hidden_dim !=
    embedding_dim, like ours)."""
    return read_keras_hub(peer, "ElectraBackbone")


def electra_from_keras_hub(peer):
    """Converts a `keras_hub.models.ElectraBackbone` into our
    `ElectraBackbone`.

    Same architecture and weights, and keras-hub's tanh GELU
    ("gelu_approximate"), so outputs agree to float32 rounding. Inputs map
    token_ids -> input_word_ids, padding_mask -> input_mask, segment_ids ->
    input_type_ids; ours also returns `encoder_outputs`.
    """
    from kerasbert.models import ElectraBackbone  # lazy: keras

    weights = keras_hub_electra_to_canonical(peer)
    config = {ours: getattr(peer, theirs) for theirs, ours in _KERAS_HUB_CONFIG.items()}
    ours = ElectraBackbone(
        **config,
        embedding_dim=peer.embedding_dim,
        activation="gelu_approximate",
        dtype=peer.dtype_policy,
    )
    return set_electra_weights(ours, weights)


def electra_to_keras_hub(ours):
    """Converts our `ElectraBackbone` (a discriminator, or a generator: its
    shared tables are copied) into a `keras_hub.models.ElectraBackbone`.

    What keras-hub fixes in code (activation, LayerNorm epsilon) must match:
    `require_exact` raises otherwise.
    """
    import keras_hub

    require_exact(ours, "ElectraBackbone")
    weights = get_electra_weights(ours)
    config = {theirs: getattr(ours, name) for theirs, name in _KERAS_HUB_CONFIG.items()}
    peer = keras_hub.models.ElectraBackbone(
        **config,
        embedding_dim=ours.embedding_dim or ours.hidden_dim,
        dtype=ours.dtype_policy,
    )
    return write_keras_hub(peer, "ElectraBackbone", weights)


# --- tf-models-official -----------------------------------------------------


def electra_from_tf_models(encoder):
    """Converts a Model Garden `BertEncoder` / `BertEncoderV2` (what
    `official.nlp.modeling.models.ElectraPretrainer` takes as its
    discriminator and generator networks; `embedding_width` is ELECTRA's
    embedding_dim) into our `ElectraBackbone`.

    Goes through `kerasbert.convert.from_tf_models` (the same checks,
    activation detection and weight mapping), then moves the weights into an
    ElectraBackbone of the same shape.
    """
    from kerasbert.models import ElectraBackbone  # lazy: keras

    bert = from_tf_models(encoder)
    names = ElectraBackbone.config_names()
    ours = ElectraBackbone(
        **{n: getattr(bert, n) for n in names if n != "dtype" and hasattr(bert, n)}
    )
    return set_electra_weights(ours, get_bert_weights(bert))
