"""Token classification (NER, POS tagging): one label per word, scored on
the word's first sub-token."""

import keras
import numpy as np
from keras import ops

from kerasbert.tasks.task import LazyPreprocessorClass
from kerasbert.tasks.task import Task
from kerasbert.tasks.task import head_initializer
from kerasbert.tasks.token_accuracy import TokenAccuracy


def _preprocessor_class():
    # lazy: tensorflow (the preprocessor runs in tf.data; the model runs on any backend)
    from kerasbert.preprocessing.token_classifier_preprocessor import TokenClassifierPreprocessor

    return TokenClassifierPreprocessor


def first_subtoken_weights(word_ids):
    """Sample weights for `fit`: 1.0 on the first sub-token of each word.

    Args:
        word_ids: int array [B, T] (or [T]): the index of the word each
            token belongs to, -1 (any negative) for [CLS], [SEP], padding.
            Sub-tokens of one word share its index.

    Returns:
        float32 array of the same shape: 1 where a token starts a word (its
        word id differs from the previous token's), 0 elsewhere.
    """
    word_ids = np.asarray(word_ids)
    previous = np.concatenate(
        [np.full(word_ids.shape[:-1] + (1,), -1, word_ids.dtype), word_ids[..., :-1]],
        axis=-1,
    )
    return ((word_ids >= 0) & (word_ids != previous)).astype("float32")


def decode_word_labels(logits, word_ids, label_names=None):
    """Per-word predictions from per-token logits (the first sub-token's).

    Args:
        logits: float [B, T, num_labels] (the model's output) or int [B, T]
            label ids (already arg-maxed).
        word_ids: int [B, T], as for `first_subtoken_weights`: word index per
            token, negative for special tokens and padding.
        label_names: optional sequence mapping label id -> name (e.g.
            ["O", "B-PER", "I-PER", ...]).

    Returns:
        a list (one per row) of lists of label ids (or names), one per word
        in word-index order. Words whose first sub-token fell outside the
        window (truncation) are missing, so a row may be shorter than its
        sentence; map back with the word indices if that matters.
    """
    logits = np.asarray(logits)
    word_ids = np.asarray(word_ids)
    predictions = logits.argmax(-1) if logits.ndim == word_ids.ndim + 1 else logits
    if predictions.shape != word_ids.shape:
        raise ValueError(
            f"logits {logits.shape} do not match word_ids {word_ids.shape}: "
            "expected [B, T, num_labels] (or [B, T] label ids) and [B, T]."
        )
    if word_ids.ndim == 1:
        predictions, word_ids = predictions[None], word_ids[None]
    first = first_subtoken_weights(word_ids) > 0
    rows = []
    for row_pred, row_ids, row_first in zip(predictions, word_ids, first):
        positions = np.flatnonzero(row_first)
        positions = positions[np.argsort(row_ids[positions], kind="stable")]
        labels = [int(p) for p in row_pred[positions]]
        if label_names is not None:
            labels = [label_names[p] for p in labels]
        rows.append(labels)
    return rows


@keras.saving.register_keras_serializable(package="kerasbert")
class TokenClassifier(Task):
    """Labels every token: `sequence_output` -> dropout -> Dense(num_labels).

    One label per word lives on its FIRST sub-token. Train with
    `model.fit(x, y, sample_weight=w)` (or a dataset of `(x, y, w)`) where
    `w` is 1.0 on first sub-tokens and 0.0 on the other sub-tokens, [CLS],
    [SEP] and padding (`first_subtoken_weights(word_ids)` builds it); y's
    value at weight-0 positions does not matter (any valid label id).

    The default loss uses Keras 3's `reduction="mean_with_sample_weight"`:
    loss = sum(w * ce) / sum(w), the mean over the labelled words of the
    batch (Keras's default "sum_over_batch_size" would divide by B * T,
    shrinking the loss with the amount of padding). The accuracy is a
    *weighted* metric (`weighted_metrics`), so it counts only weight-1
    positions. Without a sample_weight every position counts, padding
    included.

    Turn predictions into per-word labels with `decode_word_labels(logits,
    word_ids, label_names)` (also `TokenClassifier.decode`).

    Args:
        backbone: a `kerasbert.models.Backbone`.
        num_labels: int >= 1, the size of the tag set (e.g. 9 for CoNLL-2003
            BIO tags).
        dropout: float, before the head (0.1).
        dtype: defaults to the backbone's policy.

    Call args:
        inputs: dict of int [B, T] `input_word_ids`, `input_mask`,
            `input_type_ids` (optional).

    Returns:
        float32 logits [B, T, num_labels].

    `compile()` defaults: `SparseCategoricalCrossentropy(from_logits=True,
    reduction="mean_with_sample_weight")`, weighted_metrics
    `TokenAccuracy(name="accuracy")` (over tokens, at any padding); AdamW as
    in `Task.compile`.

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import BertBackbone
    >>> from kerasbert.tasks import TokenClassifier
    >>> model = TokenClassifier(BertBackbone(vocabulary_size=10, num_layers=1, num_heads=2,
    ...                                      hidden_dim=8, intermediate_dim=16), num_labels=4)
    >>> logits = model({"input_word_ids": np.array([[2, 5, 6, 7, 3]]),            # [B, T]
    ...                 "input_mask": np.ones((1, 5), "int32")})
    >>> tuple(logits.shape)                                  # [B, T, num_labels]
    (1, 5, 4)
    """

    per_token_outputs = True

    decode = staticmethod(decode_word_labels)

    preprocessor_class = LazyPreprocessorClass(_preprocessor_class)
    label_argument = "num_labels"

    def num_label_names(self):
        return self.num_labels

    def __init__(self, backbone, num_labels, dropout=0.1, dtype=None, **kwargs):
        super().__init__(backbone, dropout=dropout, dtype=dtype, **kwargs)
        num_labels = int(num_labels)
        if num_labels < 1:
            raise ValueError(f"num_labels must be >= 1, got {num_labels}.")
        self.num_labels = num_labels
        self.output_dense = keras.layers.Dense(
            num_labels,
            kernel_initializer=head_initializer(backbone),
            dtype=self.head_dtype,
            name="logits",
        )
        self.output_dense.build((None, None, backbone.output_dim))
        self.built = True

    def call(self, inputs, training=False):
        sequence = self.encode(inputs, training=training)["sequence_output"]
        x = self.output_dropout(sequence, training=training)
        return ops.cast(self.output_dense(x), "float32")

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight"
        )

    def default_weighted_metrics(self):
        return [TokenAccuracy(name="accuracy")]

    def get_config(self):
        config = super().get_config()
        config["num_labels"] = self.num_labels
        return config
