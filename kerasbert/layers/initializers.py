"""The weight initializer every BERT-family layer shares."""

import keras


def bert_initializer(stddev=0.02):
    """Truncated normal with stddev 0.02, as in the original BERT."""
    return keras.initializers.TruncatedNormal(stddev=stddev)
