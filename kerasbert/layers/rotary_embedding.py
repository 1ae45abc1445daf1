"""Rotary position embedding (Su et al., 2021, "RoFormer").

Positions enter attention by rotating each query and key vector, pair of
coordinates by pair, through an angle that grows with the position; a
query-key product then depends on the two positions only through their
difference. There is no table, so nothing bounds the length a model runs
at, and nothing is learned.

Coordinates are paired by halves (d with d + D/2), as GPT-NeoX, Llama and
ModernBERT's checkpoints pair them, not interleaved (2i with 2i + 1).
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasbert")
class RotaryEmbedding(keras.layers.Layer):
    """Rotates query or key heads by their positions.

    Frequency i (of D/2) is theta^(-2i / D); position t turns pair i by
    t * theta^(-2i / D) radians. A larger theta turns slower, so distant
    positions stay apart (ModernBERT: 160,000 on its global layers, 10,000
    on its local ones).

    Args:
        theta: float. The base of the frequencies.

    Call args:
        x: float [B, T, N, D], D even.
        positions: optional int [B, T] or [T] (default 0 .. T - 1).

    Returns:
        float [B, T, N, D], computed in float32 and cast back to x's dtype.

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import RotaryEmbedding
    >>> x = np.ones((1, 3, 2, 4), "float32")                  # [B, T, N, D]
    >>> rotated = np.asarray(RotaryEmbedding(theta=10000.0)(x))
    >>> tuple(rotated.shape), bool(np.allclose(rotated[0, 0], x[0, 0]))   # position 0: unturned
    ((1, 3, 2, 4), True)
    """

    def __init__(self, theta=10000.0, **kwargs):
        super().__init__(**kwargs)
        self.theta = float(theta)

    def cos_sin(self, positions, head_dim):
        """(cos, sin), each float32 [..., T, 1, D], for positions [..., T]."""
        exponents = ops.arange(0, head_dim, 2, dtype="float32") / float(head_dim)
        inverse_frequency = 1.0 / ops.power(self.theta, exponents)  # [D/2]
        angles = ops.expand_dims(ops.cast(positions, "float32"), -1) * inverse_frequency
        angles = ops.expand_dims(ops.concatenate([angles, angles], axis=-1), -2)
        return ops.cos(angles), ops.sin(angles)

    def call(self, x, positions=None):
        if positions is None:
            positions = ops.arange(ops.shape(x)[1], dtype="int32")
        cos, sin = self.cos_sin(positions, x.shape[-1])
        x32 = ops.cast(x, "float32")
        first, second = ops.split(x32, 2, axis=-1)
        rotated = ops.concatenate([-second, first], axis=-1)
        return ops.cast(x32 * cos + rotated * sin, x.dtype)

    def compute_output_shape(self, x_shape, positions_shape=None):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config["theta"] = self.theta
        return config
