"""Masked-LM head: gather the masked positions, transform, tied decoder."""

import keras
from keras import ops

from kerasbert import kernels
from kerasbert.layers.fused_dense import FusedDense
from kerasbert.layers.fused_layer_norm import FusedLayerNorm
from kerasbert.layers.initializers import bert_initializer


@keras.saving.register_keras_serializable(package="kerasbert")
class MaskedLMHead(keras.layers.Layer):
    """Predicts the original tokens at `masked_positions`.

    The masked positions are gathered *first*, so the vocabulary projection
    costs P x V per sequence rather than T x V. The gathered vectors go through
    dense + activation + LayerNorm and are decoded with the transposed token
    embedding (weight tying, as in BERT) plus a per-token output bias.

    Args:
        vocabulary_size: int.
        token_embedding: a `keras.layers.ReversibleEmbedding` to tie the
            decoder to (the backbone's `token_embedding`). If None the head
            owns an untied [V, E] decoder; `embedding_dim` is then required.
        embedding_dim: int or None. Decoder input width when untied.
        activation: str. Transform activation ("gelu" = erf form).
        layer_norm_epsilon: float.
        initializer_range: float.
        use_bias: bool. False: the transform dense and its LayerNorm have
            no bias (ModernBERT's head); the output bias stays. Written to
            the config only when False, so existing configs are unchanged.

    Call args:
        sequence_output: float tensor [B, T, H].
        masked_positions: int tensor [B, P].

    Returns:
        float32 logits [B, P, V] (float32 even under mixed precision, so the
        loss is computed stably).

    A loss reads `hidden(...)` (the transformed [B, P, E] vectors) and
    `cross_entropy(hidden, labels)`, which never builds the [B, P, V]
    logits (`kernels.decoder_cross_entropy` picks the faster layout); a
    training step that does not read the logits does not compute them.

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import MaskedLMHead
    >>> head = MaskedLMHead(vocabulary_size=10, embedding_dim=8)   # untied decoder [V, E]
    >>> sequence_output = np.zeros((2, 6, 8), "float32")      # [B, T, H]
    >>> masked_positions = np.array([[1, 4], [2, 3]])         # [B, P]
    >>> tuple(head(sequence_output, masked_positions).shape)  # logits [B, P, V]
    (2, 2, 10)
    """

    def __init__(
        self,
        vocabulary_size,
        token_embedding=None,
        embedding_dim=None,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        use_bias=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if token_embedding is None and embedding_dim is None:
            raise ValueError(
                "MaskedLMHead needs `token_embedding` (tied decoder) or "
                "`embedding_dim` (untied decoder)."
            )
        if token_embedding is not None:
            embedding_dim = token_embedding.output_dim
            if token_embedding.input_dim != vocabulary_size:
                raise ValueError(
                    f"vocabulary_size {vocabulary_size} does not match the "
                    f"token embedding's {token_embedding.input_dim} rows."
                )
        self.vocabulary_size = vocabulary_size
        self.token_embedding = token_embedding
        self.embedding_dim = embedding_dim
        self.activation = activation
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.use_bias = bool(use_bias)
        self.dense = FusedDense(
            embedding_dim,
            activation=activation,
            use_bias=self.use_bias,
            kernel_initializer=bert_initializer(initializer_range),
            dtype=self.dtype_policy,
            name="transform",
        )
        self.layer_norm = FusedLayerNorm(
            epsilon=layer_norm_epsilon,
            center=self.use_bias,
            dtype=self.dtype_policy,
            name="transform_layer_norm",
        )

    @classmethod
    def tied_to(cls, encoder, name, dtype=None):
        """The built head of a pretrainer over `encoder` (a backbone): decoder
        tied to its token embedding, transform settings from its config,
        input width its `output_dim`, biases unless the encoder's class says
        `masked_lm_head_bias = False` (ModernBERT). One recipe for the pretrainers and
        the TF1 checkpoint loader, whose variable names must agree."""
        head = cls(
            vocabulary_size=encoder.vocabulary_size,
            token_embedding=encoder.token_embedding,
            activation=encoder.activation,
            layer_norm_epsilon=encoder.layer_norm_epsilon,
            initializer_range=encoder.initializer_range,
            use_bias=getattr(encoder, "masked_lm_head_bias", True),
            dtype=dtype or encoder.dtype_policy,
            name=name,
        )
        head.build((None, None, encoder.output_dim))
        return head

    def build(self, sequence_output_shape, masked_positions_shape=None):
        self.dense.build((None, None, sequence_output_shape[-1]))
        self.layer_norm.build((None, None, self.embedding_dim))
        if self.token_embedding is None:
            self.decoder_kernel = self.add_weight(
                name="decoder_kernel",
                shape=(self.vocabulary_size, self.embedding_dim),
                initializer=bert_initializer(self.initializer_range),
            )
        self.output_bias = self.add_weight(
            name="output_bias",
            shape=(self.vocabulary_size,),
            initializer="zeros",
        )
        self.built = True

    @property
    def decoder(self):
        """The [V, E] decoder: the tied token embedding or the own kernel."""
        return self.decoder_kernel if self.token_embedding is None else self.token_embedding

    def hidden(self, sequence_output, masked_positions):
        """[B, T, H] states -> the transformed [B, P, E] vectors the decoder
        scores (gathered first: the projection costs P x V, not T x V)."""
        positions = ops.cast(masked_positions, "int32")
        gathered = ops.take_along_axis(sequence_output, ops.expand_dims(positions, -1), axis=1)
        return self.layer_norm(self.dense(gathered))

    def logits(self, hidden):
        """float32 [B, P, V] of `hidden` ([B, P, E])."""
        return kernels.decoder_logits(hidden, self.decoder, self.output_bias)

    def cross_entropy(self, hidden, labels):
        """(cross-entropy, hits) float32 [B, P] of int `labels` [B, P] under
        `logits(hidden)`, without building them."""
        return kernels.decoder_cross_entropy(hidden, labels, self.decoder, self.output_bias)

    def call(self, sequence_output, masked_positions):
        return self.logits(self.hidden(sequence_output, masked_positions))

    def compute_output_shape(self, sequence_output_shape, masked_positions_shape):
        return tuple(masked_positions_shape) + (self.vocabulary_size,)

    def get_config(self):
        # The tied embedding is not serialised here: the owning task model
        # passes its backbone's `token_embedding` when it is rebuilt.
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "embedding_dim": self.embedding_dim,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "initializer_range": self.initializer_range,
            }
        )
        if not self.use_bias:
            config["use_bias"] = False
        return config
