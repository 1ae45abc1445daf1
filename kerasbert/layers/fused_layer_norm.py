"""`FusedLayerNorm`: a LayerNormalization layer the backend can run as one
kernel outside training."""

import keras

from kerasbert import kernels


@keras.saving.register_keras_serializable(package="kerasbert")
class FusedLayerNorm(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` over the last axis (same weights,
    names and options) computed through `kernels.layer_norm`: outside
    training, under TensorFlow with oneDNN, one `_MklLayerNorm` kernel;
    elsewhere, and in training, Keras's own computation. Every encoder
    block's and embedding's LayerNorm uses it.

    Args:
        **kwargs: `keras.layers.LayerNormalization`'s arguments; `axis`
            must be -1 (the default).

    Call args:
        inputs: float [..., H].
        training: bool or None. Training keeps Keras's form, whose
            gradient is TensorFlow's own.

    Returns:
        float [..., H] in the layer's compute dtype.

    Example:

    >>> import numpy as np
    >>> layer = FusedLayerNorm(epsilon=1e-12, name="layer_norm")
    >>> x = np.arange(12, dtype="float32").reshape(2, 3, 2)     # [B, T, H]
    >>> layer(x).numpy()[0].round(3).tolist()
    [[-1.0, 1.0], [-1.0, 1.0], [-1.0, 1.0]]
    >>> [v.path for v in layer.weights]                        # keras's names
    ['layer_norm/gamma', 'layer_norm/beta']
    """

    def __init__(self, axis=-1, **kwargs):
        if axis not in (-1, [-1], (-1,)):    # a config stores [-1]
            raise ValueError(f"FusedLayerNorm normalises the last axis (axis=-1), got axis={axis!r}.")
        super().__init__(axis=-1, **kwargs)

    def call(self, inputs, training=None):
        if self.rms_scaling:
            return super().call(inputs)
        outputs = kernels.layer_norm(inputs, self.gamma, self.beta, self.epsilon,
                                     fused=not training)
        return keras.ops.cast(outputs, self.compute_dtype)
