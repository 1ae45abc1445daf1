"""`FusedDense`: a Dense layer whose product, bias and activation the
backend can run as one kernel."""

import keras

from kerasbert import kernels
from kerasbert.layers.activations import for_training
from kerasbert.layers.activations import get_activation


@keras.saving.register_keras_serializable(package="kerasbert")
class FusedDense(keras.layers.Dense):
    """`keras.layers.Dense` (same weights, names and options) computed
    through `kernels.dense`: under TensorFlow one 2-D product with its bias
    and, outside training, its activation fused into the same oneDNN kernel
    (the activation computed there in float32 whatever the compute dtype).
    Every encoder block's projections use it.

    Args:
        units: int. Output width O.
        activation: None or a name from `kerasbert.layers.activations`
            ("gelu", "tanh", ...); the config stores the name.
        **kwargs: `keras.layers.Dense`'s other arguments.

    Call args:
        inputs: float [..., I].
        training: bool or None. Only training keeps the activation apart
            from the product (its gradient needs the product); it runs the
            activation's training form (`activations.for_training`).

    Returns:
        float [..., O].

    Example:

    >>> import numpy as np
    >>> layer = FusedDense(4, activation="gelu", name="intermediate")
    >>> x = np.ones((2, 3, 8), "float32")                     # [B, T, I]
    >>> tuple(layer(x).shape)                                  # [B, T, O]
    (2, 3, 4)
    >>> [v.path for v in layer.weights]                        # keras Dense's names
    ['intermediate/kernel', 'intermediate/bias']
    """

    def __init__(self, units, activation=None, **kwargs):
        super().__init__(units, activation=get_activation(activation) if activation else None,
                         **kwargs)
        self.activation_name = activation

    def call(self, inputs, training=None):
        # `self.kernel` already holds a LoRA update; a quantized layer runs
        # Keras's `quantized_call` instead of this.
        activation = self.activation if self.activation_name else None
        fused = None if training else getattr(activation, "fused_form", activation)
        return kernels.dense(inputs, self.kernel, self.bias, for_training(activation, training),
                             fused)

    def get_config(self):
        config = super().get_config()
        config["activation"] = self.activation_name
        return config
