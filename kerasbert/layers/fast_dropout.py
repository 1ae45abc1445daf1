"""`FastDropout`: Keras's Dropout layer with a cheaper random draw."""

import keras

from kerasbert import kernels


@keras.saving.register_keras_serializable(package="kerasbert")
class FastDropout(keras.layers.Dropout):
    """`keras.layers.Dropout` (same arguments, config and seed state)
    computed through `kernels.dropout`: under TensorFlow each element draws
    16 random bits instead of a 32-bit float, half the random numbers of
    Keras's draw; the rate is rounded to a multiple of 2**-16. Every
    encoder block, embedding and task head of kerasbert uses it.

    Args:
        rate: float in [0, 1], the fraction of elements zeroed in training.
        noise_shape: as Keras's (a broadcast mask takes Keras's draw).
        seed: int or None.
        **kwargs: `keras.layers.Layer` arguments.

    Call args:
        inputs: float [..., D].
        training: bool. Outside training the layer is the identity.

    Returns:
        float [..., D], the inputs' dtype.

    Example:

    >>> import numpy as np
    >>> layer = FastDropout(0.25, seed=1)
    >>> x = np.ones((64, 128), "float32")
    >>> y = layer(x, training=True).numpy()
    >>> sorted(set(y.ravel().tolist()))              # zeroed, or scaled by 1 / (1 - 0.25)
    [0.0, 1.3333333730697632]
    >>> bool(abs((y == 0).mean() - 0.25) < 0.02)
    True
    >>> bool(np.array_equal(layer(x), x))            # the identity outside training
    True
    """

    def call(self, inputs, training=False):
        if training and self.rate > 0:
            return kernels.dropout(inputs, self.rate, self.seed_generator,
                                   noise_shape=self.noise_shape)
        return inputs
