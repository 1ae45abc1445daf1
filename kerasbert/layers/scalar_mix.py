"""ELMo's task-specific mix of a model's layers (Peters et al. 2018, eq. 1)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasbert")
class ScalarMix(keras.layers.Layer):
    """gamma * sum_l softmax(w)_l * layer_l.

    The weights w start at 0 (an even average) and gamma at 1; both are
    learned by the task while the model that makes the layers stays frozen.

    Args:
        num_layers: int. How many layers are mixed (ELMo: 3).

    Call args:
        layers: a list of num_layers float tensors of one shape [..., H].

    Returns:
        float [..., H].

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import ScalarMix
    >>> mix = ScalarMix(num_layers=3)
    >>> layers = [np.full((2, 5, 8), float(i), "float32") for i in range(3)]
    >>> tuple(mix(layers).shape)                              # 3 x [..., H] -> [..., H]
    (2, 5, 8)
    """

    def __init__(self, num_layers=3, **kwargs):
        super().__init__(**kwargs)
        self.num_layers = num_layers

    def build(self, input_shape):
        if len(input_shape) != self.num_layers:
            raise ValueError(f"ScalarMix(num_layers={self.num_layers}) got "
                             f"{len(input_shape)} layers.")
        self.mix_weights = self.add_weight(name="mix_weights", shape=(self.num_layers,),
                                           initializer="zeros", autocast=False)
        self.gamma = self.add_weight(name="gamma", shape=(), initializer="ones",
                                     autocast=False)
        self.built = True

    def call(self, layers):
        # The softmax runs in float32 (three numbers), then the sum in the
        # compute dtype.
        weights = ops.softmax(ops.cast(self.mix_weights, "float32"))
        weights = ops.cast(weights * ops.cast(self.gamma, "float32"), self.compute_dtype)
        mixed = weights[0] * layers[0]
        for i in range(1, self.num_layers):
            mixed = mixed + weights[i] * layers[i]
        return mixed

    def compute_output_shape(self, input_shape):
        return input_shape[0]

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers)
        return config
