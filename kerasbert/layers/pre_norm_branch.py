"""A residual branch in pre-LayerNorm form: dropout(inner(LayerNorm(x)))."""

import keras

from kerasbert.layers.fast_dropout import FastDropout


@keras.saving.register_keras_serializable(package="kerasbert")
class PreNormBranch(keras.layers.Layer):
    """Wraps a layer as a pre-LayerNorm residual branch (the Reformer's F and
    G): the caller adds the result to its residual stream.

    Args:
        inner: a layer [B, T, H] -> [B, T, H] (an attention, a
            feed-forward); extra call arguments (padding_mask) go to it.
        dropout: float, on the branch's output.
        layer_norm_epsilon: float.

    Call args:
        x: float [B, T, H].
        training: bool.
        **kwargs: passed to `inner`.

    Returns:
        float [B, T, H].

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import ChunkedFeedForward, PreNormBranch
    >>> branch = PreNormBranch(ChunkedFeedForward(intermediate_dim=16))
    >>> x = np.zeros((2, 5, 8), "float32")                    # [B, T, H]
    >>> tuple((x + branch(x)).shape)                          # the caller adds the residual
    (2, 5, 8)
    """

    def __init__(self, inner, dropout=0.0, layer_norm_epsilon=1e-12, **kwargs):
        super().__init__(**kwargs)
        self.inner = inner
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm")
        self.dropout_layer = FastDropout(dropout, dtype=self.dtype_policy)

    def build(self, x_shape):
        self.layer_norm.build(x_shape)
        self.inner.build(x_shape)
        self.built = True

    def call(self, x, training=None, **kwargs):
        y = self.inner(self.layer_norm(x), training=training, **kwargs)
        return self.dropout_layer(y, training=training)

    def compute_output_shape(self, x_shape):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update({"inner": keras.saving.serialize_keras_object(self.inner),
                       "dropout": self.dropout, "layer_norm_epsilon": self.layer_norm_epsilon})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["inner"] = keras.saving.deserialize_keras_object(config["inner"])
        return cls(**config)
