"""Activations by name, so layer configs store a string and round-trip.

BERT uses the exact (erf) GELU. keras-hub's BertBackbone and Model Garden's
default `BertEncoder` use the tanh approximation; converted models keep the
activation they were trained with, otherwise parity would be off by ~1e-3.
"""

import keras

_ACTIVATIONS = {
    "gelu": lambda x: keras.activations.gelu(x, approximate=False),
    "gelu_approximate": lambda x: keras.activations.gelu(x, approximate=True),
    "relu": keras.activations.relu,
    "silu": keras.activations.silu,
    "tanh": keras.activations.tanh,
}


def get_activation(name):
    """Returns the activation function registered under `name`."""
    if name not in _ACTIVATIONS:
        raise ValueError(
            f"Unknown activation {name!r}; expected one of "
            f"{sorted(_ACTIVATIONS)}."
        )
    return _ACTIVATIONS[name]


def activation_names():
    return sorted(_ACTIVATIONS)
