"""Raw words with a tag per word -> ELMo character features: one
prediction per word (no sub-word pieces), for `TokenClassifier` on an
`ElmoBackbone`."""

import keras
import tensorflow as tf

from kerasbert.errors import UsageError
from kerasbert.preprocessing.elmo_inputs import ElmoInputs
from kerasbert.preprocessing.elmo_inputs import register_counterpart
from kerasbert.preprocessing.token_classifier_preprocessor import TokenClassifierPreprocessor
from kerasbert.preprocessing.token_classifier_preprocessor import _words


@register_counterpart(TokenClassifierPreprocessor)
@keras.saving.register_keras_serializable(package="kerasbert")
class ElmoTokenClassifierPreprocessor(ElmoInputs, TokenClassifierPreprocessor):
    """Words -> `input_char_ids` [B, T, C], `input_mask` [B, T]; tags ->
    labels int32 [B, T] with sample weights 1 on the words, 0 on padding.
    Words past T have no prediction (NaN rows from `predict`, as
    `TokenClassifierPreprocessor`'s cut words)."""

    def preprocess(self, x, y=None, sample_weight=None):
        if sample_weight is not None:
            raise UsageError("Tagging weights come from the words; give no sample_weight.")
        words = self.ragged(x)
        features = self.char_features(words)
        if y is None:
            return features
        y = self.ragged(y) if y.dtype == tf.string else (
            y if isinstance(y, tf.RaggedTensor) else tf.RaggedTensor.from_tensor(y))
        tags = y.with_flat_values(self.graph_label_ids(y.flat_values))
        labels = tags[:, :self.sequence_length].to_tensor(0, shape=[None, self.sequence_length])
        weights = tf.cast(features["input_mask"], tf.float32)
        return features, labels, weights

    def predict_dataset(self, x, batch_size=32, fixed_shapes=False):
        words = _words(x)
        steps = tf.cast(tf.ragged.range(words.row_lengths()).flat_values, tf.int32)
        positions = words.with_flat_values(tf.where(steps < self.sequence_length, steps, -1))
        return self.dataset(words, batch_size=batch_size, fixed_shapes=fixed_shapes), positions
