"""Raw text -> ELMo character features, for `TextClassifier` on an
`ElmoBackbone` (its `pooled_output`: the mean of the mixed layers over the
words)."""

import keras
import tensorflow as tf

from kerasbert.errors import UsageError
from kerasbert.preprocessing.elmo_inputs import ElmoInputs
from kerasbert.preprocessing.elmo_inputs import register_counterpart
from kerasbert.preprocessing.task_preprocessor import clean_text
from kerasbert.preprocessing.text_classifier_preprocessor import TextClassifierPreprocessor
from kerasbert.text.elmo_words import split_words


@register_counterpart(TextClassifierPreprocessor)
@keras.saving.register_keras_serializable(package="kerasbert")
class ElmoTextClassifierPreprocessor(ElmoInputs, TextClassifierPreprocessor):
    """Texts -> words (BERT's basic split, cased) -> `input_char_ids` [B, T,
    C], `input_mask` [B, T]: single texts only (ELMo has no segment
    pairs); labels as `TextClassifierPreprocessor`'s."""

    def _decide(self, pair):
        if pair:
            raise UsageError("An ELMo classifier takes single texts, not pairs (texts_a, "
                             "texts_b): join them into one text.")
        super()._decide(pair)

    def preprocess(self, x, y=None, sample_weight=None):
        if isinstance(x, (tuple, list)):
            raise UsageError("An ELMo classifier takes single texts, not pairs.")
        features = self.char_features(split_words(clean_text(x)))
        if y is not None:
            y = tf.cast(y, tf.float32) if self.format.float_labels else self.graph_label_ids(y)
        return keras.utils.pack_x_y_sample_weight(features, y, sample_weight)
