"""Post-LayerNorm transformer encoder block (BERT's layout)."""

import keras
from keras import ops

from kerasbert.layers.attention import MultiHeadSelfAttention
from kerasbert.layers.attention_bias import padding_mask_to_attention_bias
from kerasbert.layers.block_sparse_attention import BlockSparseSelfAttention
from kerasbert.layers.initializers import bert_initializer
from kerasbert.layers.transformer_block_base import TransformerBlockBase


@keras.saving.register_keras_serializable(package="kerasbert")
class TransformerEncoderBlock(TransformerBlockBase):
    """One encoder layer: attention and feed-forward, each followed by
    dropout, a residual add and LayerNorm (post-LN, as in BERT)::

        x = LayerNorm(x + Dropout(Attention(x)))
        x = LayerNorm(x + Dropout(Dense_H(act(Dense_I(x)))))

    Args:
        num_heads: int.
        intermediate_dim: int. Width of the feed-forward hidden layer.
        activation: str. A name from `kerasbert.layers.activations`; BERT
            uses "gelu" (erf form).
        dropout: float. Used for the hidden states and attention
            probabilities alike (BERT uses 0.1 for both).
        layer_norm_epsilon: float.
        initializer_range: float.
        attention: "full" (BERT) or "bigbird" (`BlockSparseSelfAttention`:
            global + sliding-window + random blocks, linear in T; full
            attention for short inputs). Both have the same weights.
        block_size, num_random_blocks, attention_seed,
            max_sequence_length: BigBird's options (see
            `BlockSparseSelfAttention`; its `seed` is `attention_seed`);
            stored in the config only when attention is "bigbird".
        norm_first: bool. False (BERT, the Transformer paper): LayerNorm
            after each residual add. True (pre-LN, tensor2tensor's and
            Model Garden's Transformer): x = x + Dropout(Attention(LN(x))),
            x = x + Dropout(FFN(LN(x))); the stack then needs a final
            LayerNorm of its own.
        use_bias: bool. Biases on the attention projections (True, BERT).

    Call args:
        x: float tensor [B, T, H].
        attention_bias: additive bias broadcastable to [B, N, T, T]. Build it
            once per model with `padding_mask_to_attention_bias`.
        padding_mask: int tensor [B, T]; convenience for stand-alone use,
            ignored when `attention_bias` is given.
        query_positions: optional int tensor [B, Q]: compute the block's
            output only at these positions (every position still serves as
            a key and value), e.g. a pretrainer's last layer at the masked
            positions. Full attention only.

    Returns:
        float tensor [B, T, H] ([B, Q, H] with `query_positions`).

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import TransformerEncoderBlock
    >>> block = TransformerEncoderBlock(num_heads=2, intermediate_dim=16)
    >>> x = np.zeros((2, 5, 8), "float32")                    # [B, T, H]
    >>> padding_mask = np.array([[1, 1, 1, 0, 0], [1] * 5])   # [B, T]
    >>> tuple(block(x, padding_mask=padding_mask).shape)      # [B, T, H]
    (2, 5, 8)
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        activation="gelu",
        dropout=0.1,
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        attention="full",
        block_size=64,
        num_random_blocks=3,
        attention_seed=0,
        max_sequence_length=None,
        norm_first=False,
        use_bias=True,
        **kwargs,
    ):
        if attention not in ("full", "bigbird"):
            raise ValueError(
                f'attention must be "full" or "bigbird", got {attention!r}.'
            )
        super().__init__(num_heads, intermediate_dim, activation, dropout, layer_norm_epsilon,
                         initializer_range, norm_first, use_bias, **kwargs)
        self.attention_type = attention
        self.block_size = block_size
        self.num_random_blocks = num_random_blocks
        self.attention_seed = attention_seed
        self.max_sequence_length = max_sequence_length

    def build(self, x_shape, *args, **kwargs):
        init = bert_initializer(self.initializer_range)
        policy = self.dtype_policy
        sparse = {}
        attention_cls = MultiHeadSelfAttention
        if self.attention_type == "bigbird":
            attention_cls = BlockSparseSelfAttention
            sparse = dict(
                block_size=self.block_size,
                num_random_blocks=self.num_random_blocks,
                seed=self.attention_seed,
                max_sequence_length=self.max_sequence_length,
            )
        # Same name and weights either way: a checkpoint serves both.
        self.attention = attention_cls(
            self.num_heads,
            dropout=self.dropout,
            initializer_range=self.initializer_range,
            dtype=policy,
            name="attention",
            **sparse,
            **({} if self.use_bias else {"use_bias": False}),
        )
        self.attention_dropout = self._dropout("attention_output_dropout")
        self.attention_layer_norm = self._layer_norm("attention_layer_norm")
        self._make_feed_forward(x_shape[-1], init)
        self.attention.build(x_shape)
        self.attention_layer_norm.build(x_shape)
        self._build_feed_forward(x_shape)
        self.built = True

    def call(self, x, attention_bias=None, padding_mask=None, training=None,
             query_positions=None):
        if attention_bias is None and padding_mask is not None:
            attention_bias = padding_mask_to_attention_bias(padding_mask)
        if self.norm_first:
            return self._call_norm_first(x, attention_bias, training, query_positions)
        if query_positions is None:
            attended = self.attention(x, attention_bias, training=training)
        else:
            if self.attention_type != "full":
                raise ValueError("query_positions needs full attention (the "
                                 f"block's attention is {self.attention_type!r}).")
            attended = self.attention(x, attention_bias, training=training,
                                      query_positions=query_positions)
            x = ops.take_along_axis(
                x, ops.expand_dims(ops.cast(query_positions, "int32"), -1), axis=1
            )
        attended = self.attention_dropout(attended, training=training)
        x = self.attention_layer_norm(x + attended)
        hidden = self.output_dropout(self._feed_forward(x), training=training)
        return self.output_layer_norm(x + hidden)

    def attention_probabilities(self, x, attention_bias=None):
        """float32 [B, N, T, T]: what the block's attention gives each key,
        on the input the attention reads (LayerNorm(x) when pre-LN)."""
        normed = self.attention_layer_norm(x) if self.norm_first else x
        return self.attention(normed, attention_bias, training=False,
                              return_attention_scores=True)[1]

    def _call_norm_first(self, x, attention_bias, training, query_positions):
        """Pre-LN: each branch reads LayerNorm(x), the residual stream is
        never normalised."""
        normed = self.attention_layer_norm(x)
        if query_positions is None:
            attended = self.attention(normed, attention_bias, training=training)
        else:
            attended = self.attention(normed, attention_bias, training=training,
                                      query_positions=query_positions)
            x = ops.take_along_axis(
                x, ops.expand_dims(ops.cast(query_positions, "int32"), -1), axis=1
            )
        x = x + self.attention_dropout(attended, training=training)
        hidden = self._feed_forward(self.output_layer_norm(x))
        return x + self.output_dropout(hidden, training=training)

    def compute_output_shape(self, x_shape, *args, **kwargs):
        return x_shape

    def get_config(self):
        config = {**super().get_config(), **self._options_config()}
        # Configs of the default layout stay as they were before the options.
        if self.norm_first:
            config["norm_first"] = True
        if not self.use_bias:
            config["use_bias"] = False
        if self.attention_type != "full":
            # Full-attention configs stay as they were before the option.
            config.update(
                {
                    "attention": self.attention_type,
                    "block_size": self.block_size,
                    "num_random_blocks": self.num_random_blocks,
                    "attention_seed": self.attention_seed,
                    "max_sequence_length": self.max_sequence_length,
                }
            )
        return config
