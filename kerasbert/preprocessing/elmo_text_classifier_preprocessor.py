"""Raw text -> ELMo character features, for `TextClassifier` on an
`ElmoBackbone` (its `pooled_output`: the mean of the mixed layers over the
words)."""

import keras

from kerasbert.errors import UsageError
from kerasbert.preprocessing.elmo_inputs import ElmoInputs
from kerasbert.preprocessing.elmo_inputs import register_counterpart
from kerasbert.preprocessing.text_classifier_preprocessor import TextClassifierPreprocessor


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
        # The text classifier's own path (its tokenizer, then its packer)
        # reads characters as it reads pieces; only pairs are not ELMo's.
        if isinstance(x, (tuple, list)):
            raise UsageError("An ELMo classifier takes single texts, not pairs.")
        return super().preprocess(x, y, sample_weight)
