"""ELMo's character encoder: byte embeddings, convolutions of several widths,
max-pooled over each word's characters."""

import keras
from keras import ops

#: The filters of every published ELMo (Peters et al. 2018): (width, count),
#: 2048 in all.
ELMO_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


@keras.saving.register_keras_serializable(package="kerasbert")
class CharacterCNN(keras.layers.Layer):
    """Maps character ids [..., C] of each word to one vector per word.

    For each filter (width w, count n): a 1-D convolution over the word's C
    character embeddings (no padding, C - w + 1 positions), plus a bias, the
    maximum over positions, then the activation (the published biLM pools
    before the activation; with relu or tanh the order does not change the
    value). The filters' results are concatenated.

    Character id 0 is padding (a word that is not there): it embeds to zeros
    and has no row in the table, so the table's rows are ids 1..num_characters-1,
    exactly the `char_embed` rows of a published weight file.

    Args:
        num_characters: int. Ids 0..num_characters-1 (ELMo: 262, i.e. 256
            bytes, 5 marks, each shifted by one, and the padding id 0).
        embedding_dim: int. Width of a character embedding (ELMo: 16).
        filters: list of [width, count] pairs.
        activation: "relu" (every published ELMo) or "tanh".

    Call args:
        char_ids: int [..., C], C >= the widest filter.

    Returns:
        float [..., sum of counts].

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import CharacterCNN
    >>> cnn = CharacterCNN(embedding_dim=4, filters=((1, 3), (2, 5)))
    >>> char_ids = np.ones((2, 6, 7), "int32")                # [B, T, C] character ids
    >>> tuple(cnn(char_ids).shape)                            # [B, T, 3 + 5]
    (2, 6, 8)
    """

    def __init__(self, num_characters=262, embedding_dim=16, filters=ELMO_FILTERS,
                 activation="relu", **kwargs):
        super().__init__(**kwargs)
        if activation not in ("relu", "tanh"):
            raise ValueError(f"activation={activation!r}: must be relu or tanh.")
        self.num_characters = num_characters
        self.embedding_dim = embedding_dim
        self.filters = [[int(w), int(n)] for w, n in filters]
        self.activation = activation
        self.output_dim = sum(n for _, n in self.filters)

    def build(self, input_shape):
        # The published code draws the table from U(-1, 1) and the relu
        # filters from U(-0.05, 0.05) (Kim et al. 2016).
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.num_characters - 1, self.embedding_dim),
            initializer=keras.initializers.RandomUniform(-1.0, 1.0))
        self.kernels, self.biases = [], []
        for i, (width, count) in enumerate(self.filters):
            self.kernels.append(self.add_weight(
                name=f"kernel_{i}", shape=(width, self.embedding_dim, count),
                initializer=keras.initializers.RandomUniform(-0.05, 0.05)))
            self.biases.append(self.add_weight(name=f"bias_{i}", shape=(count,),
                                               initializer="zeros"))
        self.built = True

    def call(self, char_ids):
        char_ids = ops.cast(char_ids, "int32")
        shape = ops.shape(char_ids)
        ids = ops.reshape(char_ids, (-1, shape[-1]))  # [N, C]
        present = ops.cast(ops.expand_dims(ids > 0, -1), self.compute_dtype)
        x = ops.take(self.embeddings, ops.maximum(ids - 1, 0), axis=0) * present
        activation = ops.relu if self.activation == "relu" else ops.tanh
        pooled = []
        for kernel, bias in zip(self.kernels, self.biases):
            conv = ops.conv(x, kernel, strides=1, padding="valid") + bias  # [N, C-w+1, n]
            pooled.append(activation(ops.max(conv, axis=1)))
        out = ops.concatenate(pooled, axis=-1)
        return ops.reshape(out, (*shape[:-1], self.output_dim))

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.output_dim)

    def get_config(self):
        config = super().get_config()
        config.update(num_characters=self.num_characters, embedding_dim=self.embedding_dim,
                      filters=self.filters, activation=self.activation)
        return config
