"""Dropout whose random mask is drawn by `kerasbert.kernels.dropout`."""

import keras

from kerasbert import kernels


@keras.saving.register_keras_serializable(package="kerasbert")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` (same arguments, rate and seeding) whose mask
    comes from `kerasbert.kernels.dropout`: under TensorFlow with XLA about
    half the cost of Keras' (see there); elsewhere Keras' own dropout.
    Inference, rate 0 and `noise_shape` run Keras' code unchanged.
    """

    def call(self, inputs, training=False):
        if not training or self.rate <= 0 or self.noise_shape is not None:
            return super().call(inputs, training=training)
        return kernels.dropout(inputs, self.rate, self.seed_generator)
