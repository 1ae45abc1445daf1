"""Highway layers (Srivastava et al. 2015) as ELMo's character encoder uses
them."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasbert")
class Highway(keras.layers.Layer):
    """`num_layers` highway layers of the input's width H:

        g = sigmoid(x W_carry + b_carry)
        x <- g * relu(x W_transform + b_transform) + (1 - g) * x

    (the published biLM calls the gate that lets the transform through the
    "carry" gate; its bias starts at -2, so a new layer mostly passes x on).

    Args:
        num_layers: int >= 0 (0: the identity, no weights).

    Call args:
        inputs: float [..., H].

    Returns:
        float [..., H].

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import Highway
    >>> highway = Highway(num_layers=2)
    >>> tuple(highway(np.zeros((2, 5, 8), "float32")).shape)   # [..., H] -> [..., H]
    (2, 5, 8)
    """

    def __init__(self, num_layers=1, **kwargs):
        super().__init__(**kwargs)
        self.num_layers = num_layers

    def build(self, input_shape):
        width = input_shape[-1]
        normal = keras.initializers.RandomNormal(stddev=(1.0 / width) ** 0.5)
        self.carry_kernels, self.carry_biases = [], []
        self.transform_kernels, self.transform_biases = [], []
        for i in range(self.num_layers):
            self.carry_kernels.append(self.add_weight(
                name=f"carry_kernel_{i}", shape=(width, width), initializer=normal))
            self.carry_biases.append(self.add_weight(
                name=f"carry_bias_{i}", shape=(width,),
                initializer=keras.initializers.Constant(-2.0)))
            self.transform_kernels.append(self.add_weight(
                name=f"transform_kernel_{i}", shape=(width, width), initializer=normal))
            self.transform_biases.append(self.add_weight(
                name=f"transform_bias_{i}", shape=(width,), initializer="zeros"))
        self.built = True

    def call(self, inputs):
        x = inputs
        for wc, bc, wt, bt in zip(self.carry_kernels, self.carry_biases,
                                  self.transform_kernels, self.transform_biases):
            gate = ops.sigmoid(ops.matmul(x, wc) + bc)
            x = gate * ops.relu(ops.matmul(x, wt) + bt) + (1.0 - gate) * x
        return x

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(num_layers=self.num_layers)
        return config
