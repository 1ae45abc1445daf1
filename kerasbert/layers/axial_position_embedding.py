"""Axial position embeddings (the Reformer's factorised position table)."""

import math

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasbert")
class AxialPositionEmbedding(keras.layers.Layer):
    """Position embeddings from two small tables instead of one long one.

    The positions 0 .. a0 * a1 - 1 are laid out on an a0 x a1 grid
    (position p at row p // a1, column p % a1); its embedding is the row's
    vector of table 0 [a0, d0] concatenated with the column's vector of
    table 1 [a1, d1], d0 + d1 = the embedding width. A 65536-position table
    of width 1024 (67M weights) becomes 128 x 256 + 512 x 768 (0.43M).

    Args:
        axial_shape: (a0, a1); a0 * a1 is the longest sequence.
        axial_dims: (d0, d1).
        initializer_range: float, stddev of the normal init.

    Call args:
        x: float [B, T, d0 + d1] (only its length and dtype are used).

    Returns:
        float [1, T, d0 + d1], added to the token embeddings.

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import AxialPositionEmbedding
    >>> embedding = AxialPositionEmbedding(axial_shape=(4, 4), axial_dims=(2, 6))
    >>> x = np.zeros((2, 10, 8), "float32")                   # [B, T, d0 + d1], T <= 4 * 4
    >>> tuple(embedding(x).shape)                             # [1, T, d0 + d1]
    (1, 10, 8)
    """

    def __init__(self, axial_shape, axial_dims, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        axial_shape, axial_dims = tuple(axial_shape), tuple(axial_dims)
        if len(axial_shape) != 2 or len(axial_dims) != 2:
            raise ValueError(f"axial_shape {axial_shape} and axial_dims {axial_dims} must be "
                             "pairs.")
        if min(axial_shape + axial_dims) < 1:
            raise ValueError(f"axial_shape {axial_shape} and axial_dims {axial_dims} must be "
                             "positive.")
        self.axial_shape = list(axial_shape)
        self.axial_dims = list(axial_dims)
        self.initializer_range = initializer_range

    @property
    def max_sequence_length(self):
        return math.prod(self.axial_shape)

    def build(self, x_shape=None):
        init = keras.initializers.RandomNormal(stddev=self.initializer_range)
        self.row_embeddings = self.add_weight(
            shape=(self.axial_shape[0], self.axial_dims[0]), initializer=init, name="rows")
        self.column_embeddings = self.add_weight(
            shape=(self.axial_shape[1], self.axial_dims[1]), initializer=init, name="columns")
        self.built = True

    def call(self, x):
        # Gathered for the T positions asked for: the full a0 * a1 table is
        # never built (256 MB for enwik8's 64k positions of width 1024).
        positions = ops.arange(ops.shape(x)[1], dtype="int32")
        a1 = self.axial_shape[1]
        table = ops.concatenate([ops.take(self.row_embeddings, positions // a1, axis=0),
                                 ops.take(self.column_embeddings, positions % a1, axis=0)],
                                axis=-1)
        return ops.cast(ops.expand_dims(table, 0), x.dtype)

    def compute_output_shape(self, x_shape):
        return (1,) + tuple(x_shape[1:])

    def get_config(self):
        config = super().get_config()
        config.update({"axial_shape": self.axial_shape, "axial_dims": self.axial_dims,
                       "initializer_range": self.initializer_range})
        return config
