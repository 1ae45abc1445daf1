"""Multi-head self-attention with an additive padding bias.

The padding mask is turned into an additive bias once per forward pass
(`padding_mask_to_attention_bias`) and shared by every layer, instead of each
layer rebuilding a [B, T, T] boolean mask. Scores are added to the bias and
soft-maxed in float32 whatever the compute dtype, so half precision neither
overflows nor loses the normalisation.
"""

import math

import keras
from keras import ops

from kerasbert.layers.initializers import bert_initializer

# Large but finite: exp(-30000) is exactly 0 in float32, and the value (plus
# any realistic score) still fits in float16 (max 65504), so a fully padded
# row gives a uniform distribution instead of NaN.
MASK_BIAS = -3.0e4


def padding_mask_to_attention_bias(padding_mask):
    """Converts a [B, T] 0/1 padding mask into a [B, 1, 1, T] float32 bias.

    Positions with mask 1 get 0, positions with mask 0 get `MASK_BIAS`. The
    bias broadcasts over heads and query positions.
    """
    mask = ops.cast(padding_mask, "float32")
    bias = (1.0 - mask) * MASK_BIAS
    return ops.expand_dims(ops.expand_dims(bias, 1), 1)


def causal_attention_bias(padding_mask):
    """A [B, 1, T, T] float32 bias for causal (decoder) self-attention.

    Query t may attend to key s only when s <= t AND key s is a real token
    (mask 1); every other entry is `MASK_BIAS`. The two conditions are
    combined with a minimum, not a sum, so a fully padded row stays at
    `MASK_BIAS` (no -6e4 that float16 could not hold) and softmaxes to a
    finite, uniform distribution instead of NaN.

    Args:
        padding_mask: int [B, T], 1 for real tokens.

    Returns:
        float32 [B, 1, T, T], broadcast over heads.
    """
    padding = padding_mask_to_attention_bias(padding_mask)  # [B, 1, 1, T]
    # Positions from a cumulative sum rather than arange(T): T may be
    # unknown while a functional graph is built.
    positions = ops.cumsum(ops.ones_like(padding_mask, dtype="int32"), axis=1)
    # future[b, t, s] is True when key s comes after query t.
    future = ops.greater(
        ops.expand_dims(positions, 1), ops.expand_dims(positions, 2)
    )
    causal = ops.cast(future, "float32") * MASK_BIAS  # [B, T, T]
    return ops.minimum(padding, ops.expand_dims(causal, 1))


@keras.saving.register_keras_serializable(package="kerasbert")
class MultiHeadSelfAttention(keras.layers.Layer):
    """Self-attention with one fused query/key/value projection.

    The fused kernel is [H, 3H], columns ordered [query | key | value] and,
    within each, head-major (column n * head_dim + d), which is the layout of
    the original BERT's [H, H] query/key/value kernels side by side.

    Args:
        num_heads: int. `hidden_dim` must divide evenly by it.
        dropout: float. Dropout on the attention probabilities.
        initializer_range: float.
        use_bias: bool. Biases on the projections (True, BERT); False for
            the Transformer's bias-free W^Q, W^K, W^V, W^O.

    Call args:
        x: float tensor [B, T, H].
        attention_bias: float tensor broadcastable to [B, N, T, T]
            (e.g. [B, 1, 1, T] from `padding_mask_to_attention_bias`), or None.
        return_attention_scores: bool. Also return the [B, N, T, T]
            probabilities (float32).
        query_positions: optional int tensor [B, Q]: only these positions
            attend (queries), every position is still a key and a value.
            `attention_bias` must then broadcast over the queries (e.g. the
            [B, 1, 1, T] padding bias).

    Returns:
        float tensor [B, T, H] ([B, Q, H] with `query_positions`; and the
        [B, N, T or Q, T] probabilities if asked).

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import MultiHeadSelfAttention, padding_mask_to_attention_bias
    >>> attention = MultiHeadSelfAttention(num_heads=2)
    >>> x = np.zeros((2, 5, 8), "float32")                    # [B, T, H]
    >>> bias = padding_mask_to_attention_bias(np.array([[1, 1, 1, 0, 0]] * 2))
    >>> output, scores = attention(x, attention_bias=bias, return_attention_scores=True)
    >>> tuple(output.shape), tuple(scores.shape)              # [B, T, H], [B, N, T, T]
    ((2, 5, 8), (2, 2, 5, 5))
    """

    def __init__(self, num_heads, dropout=0.1, initializer_range=0.02, use_bias=True,
                 **kwargs):
        super().__init__(**kwargs)
        self.num_heads = num_heads
        self.dropout = dropout
        self.initializer_range = initializer_range
        # False: projections without biases (the Transformer's W^Q, W^K,
        # W^V, W^O; Model Garden's Seq2SeqTransformer).
        self.use_bias = bool(use_bias)
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="attention_dropout"
        )

    def build(self, x_shape, attention_bias_shape=None):
        hidden_dim = x_shape[-1]
        if hidden_dim % self.num_heads:
            raise ValueError(
                f"hidden_dim {hidden_dim} is not divisible by num_heads "
                f"{self.num_heads}."
            )
        self.hidden_dim = hidden_dim
        self.head_dim = hidden_dim // self.num_heads
        # Projections are created here because their width is the input's.
        init = bert_initializer(self.initializer_range)
        self.qkv_dense = keras.layers.Dense(
            3 * hidden_dim,
            use_bias=self.use_bias,
            kernel_initializer=init,
            dtype=self.dtype_policy,
            name="qkv",
        )
        self.output_dense = keras.layers.Dense(
            hidden_dim,
            use_bias=self.use_bias,
            kernel_initializer=init,
            dtype=self.dtype_policy,
            name="attention_output",
        )
        self.qkv_dense.build(x_shape)
        self.output_dense.build(x_shape)
        self.built = True

    def call(
        self,
        x,
        attention_bias=None,
        training=None,
        return_attention_scores=False,
        query_positions=None,
    ):
        # Split (not slice) the fused projection: the gradient of a split is
        # one concat, while each strided slice's gradient materialises a
        # zero-padded [B, T, 3H] tensor (measured: 1.5x slower backward).
        query, key, value = ops.split(self.qkv_dense(x), 3, axis=-1)
        if query_positions is not None:
            # Only these rows attend (keys and values stay at every
            # position): the output equals the full layer's at those rows.
            query = ops.take_along_axis(
                query, ops.expand_dims(ops.cast(query_positions, "int32"), -1), axis=1
            )
        query, key, value = (self.split_heads(t) for t in (query, key, value))
        return self.attend(query, key, value, attention_bias, training=training,
                           return_attention_scores=return_attention_scores)

    def split_heads(self, x):
        """[B, T, H] -> [B, T, num_heads, head_dim]."""
        shape = ops.shape(x)
        return ops.reshape(x, (shape[0], shape[1], self.num_heads, self.head_dim))

    def project(self, x):
        """The query, key and value heads of `x` [B, T, H], each
        [B, T, num_heads, head_dim] (a decoder's cached step projects its new
        token here and attends to its cache with `attend`)."""
        return tuple(self.split_heads(t) for t in ops.split(self.qkv_dense(x), 3, axis=-1))

    def attend(self, query, key, value, attention_bias=None, training=None,
               return_attention_scores=False):
        """Scaled dot-product attention over heads, then the output
        projection.

        Args:
            query: [B, Q, N, D] (unscaled); key, value: [B, S, N, D].
            attention_bias: float, broadcastable to [B, N, Q, S], or None.

        Returns:
            [B, Q, H] (and the float32 [B, N, Q, S] probabilities if asked).
        """
        shape = ops.shape(query)
        # Scaling the query before the product touches T*D values, not T*T.
        query = query * ops.cast(1.0 / math.sqrt(self.head_dim), query.dtype)
        scores = ops.einsum("btnd,bsnd->bnts", query, key)
        scores = ops.cast(scores, "float32")
        if attention_bias is not None:
            scores = scores + ops.cast(attention_bias, "float32")
        probs = ops.softmax(scores, axis=-1)
        dropped = self.dropout_layer(
            ops.cast(probs, self.compute_dtype), training=training
        )
        context = ops.einsum("bnts,bsnd->btnd", dropped, value)
        context = ops.reshape(context, (shape[0], shape[1], self.hidden_dim))
        output = self.output_dense(context)
        if return_attention_scores:
            return output, probs
        return output

    def compute_output_shape(self, x_shape, attention_bias_shape=None):
        return x_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "dropout": self.dropout,
                "initializer_range": self.initializer_range,
            }
        )
        if not self.use_bias:
            # Configs with biases stay as they were before the option.
            config["use_bias"] = False
        return config


@keras.saving.register_keras_serializable(package="kerasbert")
class MultiHeadCrossAttention(MultiHeadSelfAttention):
    """Attention from one sequence (queries) to another (keys and values):
    a decoder attending to the encoder's output (Vaswani et al., 2017,
    "encoder-decoder attention").

    The same computation as `MultiHeadSelfAttention` (`attend`), with two
    projections: `query` [H, H] on the decoder states and a fused
    `key_value` [H, 2H] (columns [key | value], head-major) on the memory,
    which a decoding loop projects once (`project_memory`) for all steps.

    Args: as `MultiHeadSelfAttention`.

    Call args:
        x: float [B, T, H], the queries' states.
        memory: float [B, S, H], the attended sequence; or None when
            `memory_heads` is given.
        attention_bias: float broadcastable to [B, N, T, S] (the memory's
            [B, 1, 1, S] padding bias), or None.
        memory_heads: optional (key, value), each [B, S, N, D], from
            `project_memory`.

    Returns:
        float [B, T, H].

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import MultiHeadCrossAttention
    >>> attention = MultiHeadCrossAttention(num_heads=2)
    >>> x = np.zeros((2, 3, 8), "float32")                    # queries [B, T, H]
    >>> memory = np.ones((2, 5, 8), "float32")                # attended [B, S, H]
    >>> tuple(attention(x, memory).shape)                     # [B, T, H]
    (2, 3, 8)
    """

    def build(self, x_shape, memory_shape=None, attention_bias_shape=None):
        hidden_dim = x_shape[-1]
        if hidden_dim % self.num_heads:
            raise ValueError(
                f"hidden_dim {hidden_dim} is not divisible by num_heads {self.num_heads}."
            )
        self.hidden_dim = hidden_dim
        self.head_dim = hidden_dim // self.num_heads
        init = bert_initializer(self.initializer_range)

        def dense(width, name):
            return keras.layers.Dense(width, use_bias=self.use_bias, kernel_initializer=init,
                                      dtype=self.dtype_policy, name=name)

        self.query_dense = dense(hidden_dim, "query")
        self.key_value_dense = dense(2 * hidden_dim, "key_value")
        self.output_dense = dense(hidden_dim, "attention_output")
        for layer in (self.query_dense, self.key_value_dense, self.output_dense):
            layer.build(x_shape)
        self.built = True

    def project_memory(self, memory):
        """(key, value) heads of `memory` [B, S, H], each [B, S, N, D]."""
        key, value = ops.split(self.key_value_dense(memory), 2, axis=-1)
        return self.split_heads(key), self.split_heads(value)

    def call(self, x, memory=None, attention_bias=None, training=None, memory_heads=None,
             return_attention_scores=False):
        key, value = memory_heads if memory_heads is not None else self.project_memory(memory)
        query = self.split_heads(self.query_dense(x))
        return self.attend(query, key, value, attention_bias, training=training,
                           return_attention_scores=return_attention_scores)

    def compute_output_shape(self, x_shape, memory_shape=None, attention_bias_shape=None):
        return x_shape
