"""Learned absolute position embeddings (BERT's position table)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasbert")
class PositionEmbedding(keras.layers.Layer):
    """One learned vector per position, 0 .. `sequence_length` - 1.

    The table is one weight, "embeddings" [sequence_length, width]
    (`position_embeddings`), named as the checkpoints' converters and the
    saved models expect; its width comes from the input's last axis.

    Args:
        sequence_length: int, rows of the table (the longest input).
        initializer: the table's initializer.

    Call args:
        x: float [..., T, width] (only its shape is used).
        start_index: int, the position of x's first row (0; a decoding
            step's offset).

    Returns:
        float [..., T, width]: rows start_index .. start_index + T - 1,
        broadcast to x's shape.

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import PositionEmbedding
    >>> embedding = PositionEmbedding(sequence_length=16)
    >>> x = np.zeros((2, 5, 8), "float32")                    # [B, T, width]
    >>> tuple(embedding(x).shape), tuple(embedding(x[:, :1], start_index=4).shape)
    ((2, 5, 8), (2, 1, 8))
    """

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        if int(sequence_length) < 1:
            raise ValueError(f"sequence_length must be >= 1, got {sequence_length}.")
        self.sequence_length = int(sequence_length)
        self.initializer = keras.initializers.get(initializer)

    def build(self, x_shape):
        self.position_embeddings = self.add_weight(
            name="embeddings", shape=(self.sequence_length, x_shape[-1]),
            initializer=self.initializer)
        self.built = True

    def call(self, x, start_index=0):
        shape = ops.shape(x)
        rows = ops.slice(ops.convert_to_tensor(self.position_embeddings), (start_index, 0),
                         (shape[-2], shape[-1]))
        return ops.broadcast_to(rows, shape)

    def compute_output_shape(self, x_shape):
        return x_shape

    def get_config(self):
        return {**super().get_config(), "sequence_length": self.sequence_length,
                "initializer": keras.initializers.serialize(self.initializer)}
