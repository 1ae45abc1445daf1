"""RoBERTa encoder with the TF Hub tensor names of BertBackbone."""

import keras

from kerasbert.models.backbone import Backbone


@keras.saving.register_keras_serializable(package="kerasbert")
class RobertaBackbone(Backbone):
    """RoBERTa encoder (Liu et al., 2019): BERT's architecture without
    segment embeddings and without a trained pooler.

    Differences from `BertBackbone`: no segment table (one segment type;
    `input_type_ids` is accepted and ignored), LayerNorm epsilon 1e-5, and
    `pooled_output` is the final hidden state of the first token (`<s>`),
    with no weights of its own. RoBERTa's classification head applies
    dense + tanh to that vector itself, which is why `pooler` is None and
    `classifier_activation` is "tanh": task models add the pre-classifier
    dense layer (see `TextClassifier`). Inputs are packed
    `<s> a </s></s> b </s>`; the rest of the contract: see `Backbone`.

    Position embeddings: the original (fairseq / Hugging Face) checkpoints
    have `max_sequence_length + 2` position rows and start real positions at
    row 2 (`padding_idx + 1`, padding_idx = 1). This table has
    `max_sequence_length` rows starting at position 0, as keras-hub's;
    `kerasbert.convert.roberta_weights.load_position_embeddings` drops the
    two offset rows when importing original weights. For right-padded
    inputs both give the same outputs at real tokens.

    Args: `Backbone`'s only (vocabulary_size 50265 for the released
    checkpoints; layer_norm_epsilon 1e-5 as fairseq's).

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import RobertaBackbone
    >>> backbone = RobertaBackbone(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
    ...                            intermediate_dim=16, max_sequence_length=16)
    >>> outputs = backbone({"input_word_ids": np.array([[0, 5, 6, 2, 1]]),   # <s> .. </s> <pad>
    ...                     "input_mask": np.array([[1, 1, 1, 1, 0]]),
    ...                     "input_type_ids": np.zeros((1, 5), "int32")})
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((1, 5, 8), (1, 8))
    """

    # fairseq's RoBERTa uses the exact (erf) GELU in its blocks and in its
    # masked-LM head's transform, as keras-hub's RobertaBackbone does; the
    # pretrainer's head reads `activation`.
    activation = "gelu"
    # RoBERTa's classification head: dense + tanh on <s>, then the output
    # projection. Task models read this when `pooler` is None.
    classifier_activation = "tanh"
    # Not config: fixed by the architecture (one segment type, no
    # factorised embedding).
    num_segments = 0
    embedding_dim = None

    def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                 max_sequence_length=512, dropout=0.1, layer_norm_epsilon=1e-5,
                 initializer_range=0.02, attention="full", block_size=64, num_random_blocks=3,
                 dtype=None, **kwargs):
        # No pooler weights: keras-hub's parameter count (124,052,736 for
        # roberta_base) has none, and fine-tuning heads add their own dense.
        self._build_encoder(locals(), pooler=False)
