"""GPT-1-style classification fine-tuning (Radford et al., 2018, §3.3)."""

import keras
from keras import ops

from kerasbert.models.gpt import GptBackbone
from kerasbert.tasks.causal_lm import next_token_elementwise
from kerasbert.tasks.task import backbone_inputs
from kerasbert.tasks.text_classifier import TextClassifier

_EPSILON = 1e-5


@keras.saving.register_keras_serializable(package="kerasbert")
class GptClassifier(TextClassifier):
    """Classifies `start a delim b extract` on the extract token's state,
    with the language-model loss as an auxiliary objective.

    Input layout: the zoo's packers write `[CLS] a [SEP] b [SEP]` (BERT /
    SentencePiece vocabularies) or `<s> a </s></s> b </s>` (byte-level BPE),
    which is GPT-1's `start a delim b extract` except for the last token.
    The model itself puts `extract_id` at each row's last real position
    (GPT-1's `_classify_` token), so BERT-format features, `kerasbert
    finetune` and the exported serving graphs feed it unchanged. The
    classifier (dropout + one linear layer, as GPT-1) reads the backbone's
    `pooled_output`, the final hidden state at that last real token, the
    only one that has attended to the whole input.

    `kerasbert finetune` uses the vocabulary's mask token ([MASK] /
    <mask>) as `extract_id`: a causal LM is pretrained without masking, so,
    like GPT-1's added tokens, its embedding is learnt in fine-tuning.
    `extract_id=None` keeps the final separator as the extract token.

    Loss in `fit`: the classification loss + `lm_weight` (GPT-1: 0.5) * the
    mean next-token cross-entropy over the real tokens of the same inputs
    (logits through the tied decoder). The auxiliary term is added with
    `add_loss` in training calls only, so `evaluate`'s loss is the task
    loss alone.

    Args:
        backbone: a `GptBackbone`.
        num_classes: int >= 1 (1 = regression, as `TextClassifier`).
        extract_id: int or None, the extract token's id.
        lm_weight: float >= 0, weight of the auxiliary LM loss (0.5).
        dropout: float, on the extract state before the classifier (0.1).
        dtype: defaults to the backbone's policy.

    Call args:
        inputs: dict of int [B, T] `input_word_ids`, `input_mask`
            (`input_type_ids` optional and ignored by GPT), right-padded.

    Returns:
        float32 logits [B, num_classes].

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import GptBackbone
    >>> from kerasbert.tasks import GptClassifier
    >>> model = GptClassifier(GptBackbone(vocabulary_size=10, num_layers=1, num_heads=2,
    ...                                   hidden_dim=8, intermediate_dim=16),
    ...                       num_classes=2, extract_id=4)   # 4 = [MASK] as GPT-1's _classify_
    >>> features = model.with_extract_token({"input_word_ids": np.array([[2, 5, 6, 3, 0]]),
    ...                                      "input_mask": np.array([[1, 1, 1, 1, 0]])})
    >>> features["input_word_ids"].numpy().tolist()         # the last real token becomes 4
    [[2, 5, 6, 4, 0]]
    >>> tuple(model(features).shape)                         # [B, num_classes]
    (1, 2)
    """

    def __init__(self, backbone, num_classes, extract_id=None, lm_weight=0.5, dropout=0.1,
                 dtype=None, **kwargs):
        if not isinstance(backbone, GptBackbone):
            raise ValueError(f"GptClassifier needs a GptBackbone, got {type(backbone).__name__} "
                             "(use TextClassifier for bidirectional encoders).")
        if float(lm_weight) < 0:
            raise ValueError(f"lm_weight must be >= 0, got {lm_weight!r}.")
        if extract_id is not None and not 0 <= int(extract_id) < backbone.vocabulary_size:
            raise ValueError(f"extract_id {extract_id} is outside the vocabulary "
                             f"(0..{backbone.vocabulary_size - 1}).")
        super().__init__(backbone, num_classes, dropout=dropout, dtype=dtype, **kwargs)
        self.extract_id = None if extract_id is None else int(extract_id)
        self.lm_weight = float(lm_weight)

    def with_extract_token(self, features):
        """The features with `extract_id` at each row's last real token."""
        if self.extract_id is None:
            return features
        ids, mask = features["input_word_ids"], features["input_mask"]
        positions = ops.cumsum(ops.ones_like(mask), axis=1) - 1
        last = ops.max(positions * mask, axis=1, keepdims=True)
        at_last = ops.logical_and(positions == last, mask > 0)
        ids = ops.where(at_last, ops.cast(self.extract_id, ids.dtype), ids)
        return dict(features, input_word_ids=ids)

    def call(self, inputs, training=False):
        features = self.with_extract_token(backbone_inputs(inputs))
        outputs = self.backbone(features, training=training)
        x = self.output_dropout(outputs["pooled_output"], training=training)
        logits = ops.cast(self.output_dense(x), "float32")
        if training and self.lm_weight > 0:
            e = next_token_elementwise(features["input_word_ids"], features["input_mask"],
                                       self.backbone.token_embedding,
                                       hidden=outputs["sequence_output"])
            lm_loss = ops.sum(e["weights"] * e["ce"]) / ops.maximum(
                ops.sum(e["weights"]), _EPSILON)
            self.add_loss(self.lm_weight * lm_loss)
        return logits

    def get_config(self):
        config = super().get_config()
        config.update(extract_id=self.extract_id, lm_weight=self.lm_weight)
        return config
