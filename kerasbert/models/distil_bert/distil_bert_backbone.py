"""DistilBERT encoder with BERT's (TF Hub) tensor names."""

import keras

from kerasbert.models.roberta.roberta_backbone import RobertaBackbone


@keras.saving.register_keras_serializable(package="kerasbert")
class DistilBertBackbone(RobertaBackbone):
    """DistilBERT (Sanh et al., 2019): a BERT encoder without segment
    embeddings and without a pooler, usually 6 layers trained by
    distillation from a 12-layer BERT (`kerasbert distill`). In this zoo,
    RoBERTa's encoder (no segment table, no pooler) with BERT's LayerNorm
    epsilon and a ReLU pre-classifier.

    The blocks are BERT's (post-LayerNorm, erf GELU as in the original and
    in keras-hub's DistilBertBackbone), so a DistilBERT layer can be
    initialised from a BERT layer weight for weight.

    Inputs (dict of int32 [B, T], the TF Hub names, as BertBackbone):
        input_word_ids: token ids.
        input_mask: 1 for real tokens, 0 for padding.
        input_type_ids: accepted so BERT feature dicts and exported
            signatures work unchanged, and ignored (no segment table).

    Outputs (dict):
        sequence_output: [B, T, hidden_dim], the last layer.
        pooled_output: [B, hidden_dim], the last layer's [CLS] vector as is
            (no pooler weights; classifiers add their own `pre_classifier`
            dense layer, see `classifier_activation`).
        encoder_outputs: list of num_layers tensors [B, T, hidden_dim].

    Args:
        vocabulary_size: int.
        num_layers: int.
        num_heads: int. hidden_dim must divide by it.
        hidden_dim: int.
        intermediate_dim: int. Feed-forward width (4 * hidden_dim).
        max_sequence_length: int. Rows of the position table.
        dropout: float. Hidden and attention-probability dropout.
        layer_norm_epsilon: float.
        initializer_range: float.
        attention, block_size, num_random_blocks: "full" attention or
            "bigbird" block-sparse attention on the same weights (see
            `kerasbert.models.backbone.attention_options`).
        dtype: a dtype or `keras.DTypePolicy`, e.g. "mixed_float16".
    """

    # Classifiers read `classifier_activation` for the pre-classifier that
    # replaces the pooler (ReLU in the original; RoBERTa's is tanh).
    classifier_activation = "relu"

    def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                 max_sequence_length=512, dropout=0.1, layer_norm_epsilon=1e-12,
                 initializer_range=0.02, attention="full", block_size=64, num_random_blocks=3,
                 dtype=None, **kwargs):
        # RoBERTa's layers and graph; only BERT's LayerNorm epsilon differs.
        self._build_encoder(locals(), pooler=False)
