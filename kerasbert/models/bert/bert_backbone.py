"""BERT encoder with TF Hub tensor names."""

import keras

from kerasbert.models.backbone import Backbone


@keras.saving.register_keras_serializable(package="kerasbert")
class BertBackbone(Backbone):
    """Bidirectional transformer encoder (Devlin et al., 2018).

    Inputs (dict of int32 [B, T], the TF Hub names):
        input_word_ids: token ids.
        input_mask: 1 for real tokens, 0 for padding.
        input_type_ids: segment ids (0 for sentence A, 1 for sentence B).

    Outputs (dict):
        sequence_output: [B, T, hidden_dim], the last layer.
        pooled_output: [B, hidden_dim], tanh(dense([CLS])).
        encoder_outputs: list of num_layers tensors [B, T, hidden_dim], the
            output of every layer (the last equals sequence_output).

    Args:
        vocabulary_size: int.
        num_layers: int.
        num_heads: int. hidden_dim must divide by it.
        hidden_dim: int.
        intermediate_dim: int. Feed-forward width (4 * hidden_dim in BERT).
        max_sequence_length: int. Rows of the position table.
        num_segments: int. Rows of the segment table.
        dropout: float. Hidden and attention-probability dropout.
        embedding_dim: int or None. Factorised embedding width (ALBERT);
            None uses hidden_dim.
        activation: str. "gelu" (erf, BERT) or "gelu_approximate" (tanh,
            as in keras-hub's and Model Garden's defaults).
        layer_norm_epsilon: float.
        initializer_range: float.
        attention, block_size, num_random_blocks: "full" attention (BERT)
            or "bigbird" block-sparse attention on the same weights (see
            `kerasbert.models.backbone.attention_options`).
        dtype: a dtype or `keras.DTypePolicy`, e.g. "mixed_float16".
    """

    def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                 max_sequence_length=512, num_segments=2, dropout=0.1, embedding_dim=None,
                 activation="gelu", layer_norm_epsilon=1e-12, initializer_range=0.02,
                 attention="full", block_size=64, num_random_blocks=3, dtype=None, **kwargs):
        self._build_encoder(locals(), num_segments=num_segments, embedding_dim=embedding_dim,
                            pooler=True)
