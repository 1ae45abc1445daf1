"""DistilBERT encoder with BERT's (TF Hub) tensor names."""

import keras

from kerasbert.models.roberta.roberta_backbone import RobertaBackbone


@keras.saving.register_keras_serializable(package="kerasbert")
class DistilBertBackbone(RobertaBackbone):
    """DistilBERT (Sanh et al., 2019): a BERT encoder without segment
    embeddings and without a pooler, usually 6 layers trained by
    distillation from a 12-layer BERT (`kerasbert distill`).

    RoBERTa's encoder here (no segment table, `pooled_output` the raw [CLS]
    vector) with BERT's LayerNorm epsilon 1e-12 and a ReLU pre-classifier
    (`classifier_activation`). The blocks are BERT's (post-LayerNorm, erf
    GELU as in the original and in keras-hub's DistilBertBackbone), so a
    DistilBERT layer can be initialised from a BERT layer weight for
    weight. Inputs, outputs and arguments: see `Backbone`.

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import DistilBertBackbone
    >>> backbone = DistilBertBackbone(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
    ...                               intermediate_dim=16, max_sequence_length=16)
    >>> ids = np.array([[2, 5, 6, 3, 0]])                     # [B, T], 0 = padding
    >>> outputs = backbone({"input_word_ids": ids, "input_mask": np.int32(ids > 0),
    ...                     "input_type_ids": np.zeros_like(ids)})   # no segment table: ignored
    >>> tuple(outputs["sequence_output"].shape), backbone.pooler is None   # [CLS] is pooled_output
    ((1, 5, 8), True)
    """

    # Classifiers read `classifier_activation` for the pre-classifier that
    # replaces the pooler (ReLU in the original; RoBERTa's is tanh).
    classifier_activation = "relu"

    def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                 layer_norm_epsilon=1e-12, **kwargs):
        # RoBERTa's layers and graph; only BERT's LayerNorm epsilon differs.
        super().__init__(vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                         layer_norm_epsilon=layer_norm_epsilon, **kwargs)
