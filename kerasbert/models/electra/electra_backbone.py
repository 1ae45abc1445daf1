"""ELECTRA encoder (the discriminator, and the generator that shares its
embeddings) with TF Hub tensor names."""

import keras

from kerasbert.layers import BertEmbeddings
from kerasbert.layers.initializers import bert_initializer
from kerasbert.models.backbone import Backbone


@keras.saving.register_keras_serializable(package="kerasbert")
class ElectraBackbone(Backbone):
    """ELECTRA's transformer encoder (Clark et al., 2020).

    BERT's encoder with a possibly narrower embedding: the token, position
    and segment tables are `embedding_dim` wide, summed and normalised at
    that width, then projected to `hidden_dim` by a dense layer when the two
    differ (ELECTRA-Small: 128 -> 256; Base and Large: no projection).
    Fine-tuning and export use the pretrained discriminator, an instance of
    this class.

    The generator of `ElectraPretrainer` is an `ElectraBackbone` too, built
    with `shared_embeddings=discriminator.embeddings`: it then reads the
    discriminator's token, position and segment tables and embedding
    LayerNorm (the same variables, as the original shares its whole
    "electra/embeddings" scope) and projects the `embedding_dim`-wide result
    to its own `hidden_dim` with its own dense layer.

    Inputs and outputs: see `Backbone`. `pooled_output` is
    tanh(dense([CLS])): the original ELECTRA has no pooler (its classifiers
    read [CLS]); keras-hub's ElectraBackbone has one, and so do we, so the
    published parameter counts and keras-hub checkpoints match. Pretraining
    does not train it; fine-tuning does.

    Args (beyond `Backbone`'s):
        embedding_dim: int or None. Width of the embedding tables; None uses
            hidden_dim (no projection).
        num_segments: int. Rows of the segment table.
        activation: str. ELECTRA's "gelu" is the erf form (its modeling.py);
            keras-hub uses the tanh form ("gelu_approximate"), which models
            converted from keras-hub keep.
        shared_embeddings: keyword only, not part of the config. A built
            `BertEmbeddings` (another ElectraBackbone's `embeddings`) whose
            tables and LayerNorm this encoder reads instead of owning its
            own; its vocabulary_size, max_sequence_length, num_segments and
            table width must equal this encoder's.

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import ElectraBackbone
    >>> backbone = ElectraBackbone(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
    ...                            intermediate_dim=16, embedding_dim=4, max_sequence_length=16)
    >>> outputs = backbone({"input_word_ids": np.array([[2, 5, 6, 3, 0]]),   # [B, T]
    ...                     "input_mask": np.array([[1, 1, 1, 1, 0]]),
    ...                     "input_type_ids": np.zeros((1, 5), "int32")})
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((1, 5, 8), (1, 8))
    """

    def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                 embedding_dim=None, max_sequence_length=512, num_segments=2, dropout=0.1,
                 activation="gelu", layer_norm_epsilon=1e-12, initializer_range=0.02,
                 attention="full", block_size=64, num_random_blocks=3, dtype=None, *,
                 shared_embeddings=None, **kwargs):
        if hidden_dim % num_heads:
            raise ValueError(
                f"hidden_dim ({hidden_dim}) must be divisible by num_heads "
                f"({num_heads})."
            )
        width = embedding_dim or hidden_dim

        self.embeddings_projection = None
        if shared_embeddings is None:
            # The projection (when E != H) lives inside BertEmbeddings, where
            # the canonical weight mapping (convert/bert_weights) finds it.
            self.embeddings = self._make_embeddings(locals(), num_segments, embedding_dim)
            embed = self.embeddings
        else:
            _check_shared_embeddings(
                shared_embeddings,
                vocabulary_size=vocabulary_size,
                max_sequence_length=max_sequence_length,
                num_segments=num_segments,
                width=width,
            )
            # Not tracked as a sublayer: this encoder reads the shared
            # tables through its graph but must not own the owner's
            # projection (nor count it in its weights).
            object.__setattr__(self, "embeddings", shared_embeddings)
            if width != hidden_dim:
                self.embeddings_projection = keras.layers.Dense(
                    hidden_dim,
                    kernel_initializer=bert_initializer(initializer_range),
                    dtype=dtype,
                    name="embeddings_projection",
                )

            def embed(token_ids, segment_ids):
                # The shared part stops before the owner's projection, which
                # maps to the owner's hidden_dim, not ours.
                x = shared_embeddings.normalized_sum(token_ids, segment_ids)
                if self.embeddings_projection is not None:
                    x = self.embeddings_projection(x)
                return x
        self.transformer_layers = self._make_blocks(locals(), num_layers)
        self._finish_encoder(locals(), embed, [[block] for block in self.transformer_layers],
                             pooler=True)
        self._shares_embeddings = shared_embeddings is not None

    @property
    def shares_embeddings(self):
        """True when the embedding tables belong to another encoder (the
        generator of an `ElectraPretrainer`)."""
        return self._shares_embeddings


def _check_shared_embeddings(shared, *, vocabulary_size, max_sequence_length,
                             num_segments, width):
    if not isinstance(shared, BertEmbeddings):
        raise TypeError(
            "shared_embeddings must be a kerasbert BertEmbeddings (another "
            f"ElectraBackbone's `.embeddings`), got {type(shared).__name__}."
        )
    if not shared.built:
        raise ValueError(
            "shared_embeddings must be built (take them from a constructed "
            "backbone)."
        )
    theirs = (shared.vocabulary_size, shared.max_sequence_length, shared.num_segments,
              shared.embedding_dim or shared.hidden_dim)
    ours = (vocabulary_size, max_sequence_length, num_segments, width)
    for key, their, our in zip(("vocabulary_size", "max_sequence_length", "num_segments",
                                "embedding width"), theirs, ours):
        if their != our:
            raise ValueError(f"shared_embeddings have {key} {their}, this encoder {our}: a "
                             "shared embedding must have the same tables.")
