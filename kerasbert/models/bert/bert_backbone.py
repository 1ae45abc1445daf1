"""BERT encoder with TF Hub tensor names."""

import keras

from kerasbert.models.backbone import Backbone


@keras.saving.register_keras_serializable(package="kerasbert")
class BertBackbone(Backbone):
    """Bidirectional transformer encoder (Devlin et al., 2018).

    The zoo's encoder as published: segment table, post-LayerNorm blocks,
    `pooled_output` = tanh(dense([CLS])). Inputs, outputs and the shared
    arguments: see `Backbone`.

    Args (beyond `Backbone`'s):
        num_segments: int. Rows of the segment table.
        embedding_dim: int or None. Factorised embedding width (ALBERT);
            None uses hidden_dim.
        activation: str. "gelu" (erf, BERT) or "gelu_approximate" (tanh,
            as in keras-hub's and Model Garden's defaults).

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import BertBackbone
    >>> backbone = BertBackbone(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=16)
    >>> outputs = backbone({"input_word_ids": np.array([[2, 5, 6, 3, 0]]),   # [B, T]
    ...                     "input_mask": np.array([[1, 1, 1, 1, 0]]),
    ...                     "input_type_ids": np.zeros((1, 5), "int32")})
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((1, 5, 8), (1, 8))
    >>> len(outputs["encoder_outputs"])                        # one [B, T, H] per layer
    1
    """

    def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                 max_sequence_length=512, num_segments=2, dropout=0.1, embedding_dim=None,
                 activation="gelu", layer_norm_epsilon=1e-12, initializer_range=0.02,
                 attention="full", block_size=64, num_random_blocks=3, dtype=None, **kwargs):
        self._build_encoder(locals(), num_segments=num_segments, embedding_dim=embedding_dim,
                            pooler=True)
