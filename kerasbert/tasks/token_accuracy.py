"""`TokenAccuracy`: the share of weighted tokens whose label is predicted,
counted over tokens, so it does not depend on how far batches are padded."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasbert")
class TokenAccuracy(keras.metrics.SparseCategoricalAccuracy):
    """`SparseCategoricalAccuracy` over every token of every batch: the
    sum of weight * correct over the sum of weights.

    Keras' metric averages each row over its T positions first, so with
    batches cut to their longest row (`kerasbert.data.finetuning.padding`)
    a batch would count with weight 1/T_batch; flattening [B, T] to [B*T]
    first makes the epoch's accuracy the token-level one at any padding.

    update_state(y_true int [B, T], y_pred float [B, T, C], sample_weight
    float [B, T] or None).
    """

    def update_state(self, y_true, y_pred, sample_weight=None):
        classes = ops.shape(y_pred)[-1]
        y_true = ops.reshape(y_true, (-1,))
        y_pred = ops.reshape(y_pred, (-1, classes))
        if sample_weight is not None:
            sample_weight = ops.reshape(sample_weight, (-1,))
        return super().update_state(y_true, y_pred, sample_weight)
