"""Token + learned position + segment embeddings, LayerNorm, dropout."""

import keras

from kerasbert.layers.axial_position_embedding import AxialPositionEmbedding
from kerasbert.layers.fast_dropout import FastDropout
from kerasbert.layers.fused_dense import FusedDense
from kerasbert.layers.fused_layer_norm import FusedLayerNorm
from kerasbert.layers.initializers import bert_initializer
from kerasbert.layers.position_embedding import PositionEmbedding
from kerasbert.layers.precision import full_precision_policy


@keras.saving.register_keras_serializable(package="kerasbert")
class BertEmbeddings(keras.layers.Layer):
    """The input embedding stack shared by every encoder in the zoo.

    Sums token, absolute position and segment embeddings, normalises the sum
    (LayerNorm, eps 1e-12), applies dropout and, when `embedding_dim` differs
    from `hidden_dim` (ALBERT's factorised embedding), projects to
    `hidden_dim`. The token table is a `ReversibleEmbedding` so heads can tie
    their output projection to it.

    Args:
        vocabulary_size: int. Rows of the token table.
        max_sequence_length: int. Rows of the position table.
        num_segments: int. Rows of the segment table (0 disables segments).
        hidden_dim: int. Width of the output.
        embedding_dim: int or None. Width of the tables; defaults to
            `hidden_dim`.
        dropout: float. Dropout applied after the LayerNorm.
        layer_norm_epsilon: float.
        initializer_range: float. Stddev of the truncated-normal init.
        normalize: bool. LayerNorm the sum (BERT and its family); False for
            GPT and the Reformer, whose blocks take the raw sum.
        axial_shape, axial_dims: pairs, or None. Factorised position table
            (`AxialPositionEmbedding`, the Reformer's) for
            axial_shape[0] * axial_shape[1] positions instead of one row per
            position.
        positions: bool. False: no position table (the attention places
            the tokens: ModernBERT's rotary embedding).
        layer_norm_bias: bool. False: a LayerNorm with a scale only
            (ModernBERT).

    Call args:
        token_ids: int tensor [B, T].
        segment_ids: int tensor [B, T] (ignored when `num_segments` is 0).

    Returns:
        float tensor [B, T, hidden_dim].

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import BertEmbeddings
    >>> embeddings = BertEmbeddings(vocabulary_size=10, max_sequence_length=16,
    ...                             num_segments=2, hidden_dim=8)
    >>> token_ids = np.array([[2, 5, 6, 3]])                  # [B, T]
    >>> segment_ids = np.zeros((1, 4), "int32")               # [B, T]
    >>> tuple(embeddings(token_ids, segment_ids).shape)       # [B, T, hidden_dim]
    (1, 4, 8)
    """

    def __init__(
        self,
        vocabulary_size,
        max_sequence_length,
        num_segments,
        hidden_dim,
        embedding_dim=None,
        dropout=0.1,
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        normalize=True,
        axial_shape=None,
        axial_dims=None,
        positions=True,
        layer_norm_bias=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.positions = bool(positions)
        self.layer_norm_bias = bool(layer_norm_bias)
        self.normalize = bool(normalize)
        self.vocabulary_size = vocabulary_size
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.hidden_dim = hidden_dim
        self.embedding_dim = embedding_dim
        self.dropout = dropout
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.axial_shape = list(axial_shape) if axial_shape else None
        self.axial_dims = list(axial_dims) if axial_dims else None

        width = embedding_dim or hidden_dim
        init = bert_initializer(initializer_range)
        # Created in this order: the order of `weights` (and of
        # get_weights / set_weights) stays as saved checkpoints have it.
        self.token_embedding = self._table(
            keras.layers.ReversibleEmbedding, vocabulary_size, width, init, "token_embedding")
        self.position_embedding = self._position_table(init)
        self.segment_embedding = None
        if num_segments:
            self.segment_embedding = self._table(
                keras.layers.Embedding, num_segments, width, init, "segment_embedding")
        self.layer_norm = None
        if self.normalize:
            self.layer_norm = FusedLayerNorm(
                epsilon=layer_norm_epsilon,
                center=self.layer_norm_bias,
                dtype=full_precision_policy(self.dtype_policy),
                name="layer_norm",
            )
        # The residual stream starts here: float32 under a mixed policy
        # (`kerasbert.layers.precision`).
        self.dropout_layer = FastDropout(
            dropout, dtype=full_precision_policy(self.dtype_policy), name="dropout"
        )
        self.projection = None
        if width != hidden_dim:
            self.projection = FusedDense(
                hidden_dim,
                kernel_initializer=init,
                dtype=self.dtype_policy,
                name="projection",
            )

    def _table(self, layer_class, rows, width, init, name):
        """An embedding table [rows, width] (token or segment ids)."""
        return layer_class(rows, width, embeddings_initializer=init, dtype=self.dtype_policy,
                           name=name)

    def _position_table(self, init):
        """The position table: one row per position, or the factorised
        `AxialPositionEmbedding` when `axial_shape` is set; None without
        `positions`."""
        if not self.positions:
            return None
        if self.axial_shape:
            return AxialPositionEmbedding(
                self.axial_shape, self.axial_dims, initializer_range=self.initializer_range,
                dtype=self.dtype_policy, name="position_embedding")
        return PositionEmbedding(
            sequence_length=self.max_sequence_length,
            initializer=init,
            dtype=self.dtype_policy,
            name="position_embedding",
        )

    def build(self, token_ids_shape, segment_ids_shape=None):
        width = self.embedding_dim or self.hidden_dim
        self.token_embedding.build(token_ids_shape)
        if self.position_embedding is not None:
            self.position_embedding.build(tuple(token_ids_shape) + (width,))
        if self.segment_embedding is not None:
            self.segment_embedding.build(token_ids_shape)
        if self.layer_norm is not None:
            self.layer_norm.build(tuple(token_ids_shape) + (width,))
        if self.projection is not None:
            self.projection.build(tuple(token_ids_shape) + (width,))
        self.built = True

    def call(self, token_ids, segment_ids=None, training=None):
        x = self.normalized_sum(token_ids, segment_ids, training=training)
        if self.projection is not None:
            x = self.projection(x)
        return x

    def normalized_sum(self, token_ids, segment_ids=None, training=None):
        """The embedding before the projection: float [B, T, embedding_dim]
        (the summed tables, LayerNorm, dropout). ELECTRA's generator shares
        exactly this with its discriminator and projects it with its own
        dense layer; it composes sublayer calls only, so it also works on
        symbolic tensors inside another model's functional graph."""
        x = self.token_embedding(token_ids)
        if self.position_embedding is not None:
            x = x + self.position_embedding(x)
        if self.segment_embedding is not None:
            if segment_ids is None:
                raise ValueError(
                    "BertEmbeddings has num_segments="
                    f"{self.num_segments} and needs `segment_ids`."
                )
            x = x + self.segment_embedding(segment_ids)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return self.dropout_layer(x, training=training)

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        return tuple(token_ids_shape) + (self.hidden_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "max_sequence_length": self.max_sequence_length,
                "num_segments": self.num_segments,
                "hidden_dim": self.hidden_dim,
                "embedding_dim": self.embedding_dim,
                "dropout": self.dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "initializer_range": self.initializer_range,
                "normalize": self.normalize,
                "axial_shape": self.axial_shape,
                "axial_dims": self.axial_dims,
            }
        )
        # Written only when off: configs saved before the options load as they were.
        if not self.positions:
            config["positions"] = False
        if not self.layer_norm_bias:
            config["layer_norm_bias"] = False
        return config
