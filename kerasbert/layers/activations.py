"""Activations by name, so layer configs store a string and round-trip.

BERT uses the exact (erf) GELU. keras-hub's BertBackbone and Model Garden's
default `BertEncoder` use the tanh approximation; converted models keep the
activation they were trained with, otherwise parity would be off by ~1e-3.
"""

import keras
from keras import ops

from kerasbert import kernels


def in_float32(activation, fused_form=None):
    """`activation` computed in float32 on half-precision inputs, the result
    cast back. TensorFlow's CPU kernels have no bfloat16 erf or tanh (they
    are emulated element by element): GELU's forward and backward over a
    bert feed-forward tensor took 2x and 1.7x as long in bfloat16 as in
    float32 on AVX512_BF16 (bench/padding_bench.py --profile), and the
    values agree to bfloat16's rounding."""

    def run(x):
        dtype = keras.backend.standardize_dtype(x.dtype)
        if dtype in ("bfloat16", "float16"):
            return ops.cast(activation(ops.cast(x, "float32")), dtype)
        return activation(x)

    # Where the activation runs inside the matrix product's kernel, that
    # kernel computes it in float32 itself (`kernels.dense`); `fused_form`
    # is the op pattern TensorFlow's remapper recognises.
    run.fused_form = fused_form or activation
    return run


def _trained_gelu(x):
    """The exact GELU of a training step: compiled loops where
    `kernels.compiled_gelu_applies`, else `kernels.gelu` in float32."""
    if kernels.compiled_gelu_applies(x):
        return kernels.compiled_gelu(x)
    return _GELU(x)


def for_training(activation, training):
    """The form of `activation` (a function from `get_activation`) for a
    call with `training`: in training its `training_form` where it has one
    (the exact GELU's compiled loops), else the function itself."""
    if not training or activation is None:
        return activation
    return getattr(activation, "training_form", activation)


# Fused as Keras's; trained with compiled loops where they apply, else with
# `kernels.gelu`'s written-out gradient.
_GELU = in_float32(kernels.gelu, lambda x: keras.activations.gelu(x, approximate=False))
_GELU.training_form = _trained_gelu


_ACTIVATIONS = {
    "gelu": _GELU,
    "gelu_approximate": in_float32(lambda x: keras.activations.gelu(x, approximate=True)),
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
