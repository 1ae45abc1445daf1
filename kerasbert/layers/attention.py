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

from kerasbert import kernels
from kerasbert.layers.fast_dropout import FastDropout
from kerasbert.layers.fused_dense import FusedDense
from kerasbert.layers.initializers import bert_initializer
from kerasbert.layers.precision import full_precision_policy
from kerasbert.layers.query_chunks import query_chunked_attention
from kerasbert.layers.rotary_embedding import RotaryEmbedding
from kerasbert.layers.sliding_window import band_bias
from kerasbert.layers.sliding_window import windowed_attention

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
        rotary_theta: float or None. Rotate queries and keys by their
            positions (`RotaryEmbedding` with this base) before they meet:
            the positions of a model without a position table (ModernBERT).
        window: int or None. Sliding-window attention: each position sees
            only the keys within `window` positions of it, computed block
            by block at a cost linear in T (`sliding_window`); None: all.
            `attention_bias` must then be a padding bias ([B, 1, 1, T]).
        query_chunk: int or None. Memory-efficient full attention: above
            this many tokens, queries attend in chunks of this many and the
            backward pass recomputes each chunk's scores
            (`query_chunks`), so no [B, N, T, T] tensor is built; the
            same values. Used when T is unknown or longer, no scores are
            returned, no `query_positions` are given, the bias is a padding
            bias ([B, 1, 1, T]) and no dropout is active; the plain path
            otherwise. None: always plain.

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
                 rotary_theta=None, window=None, query_chunk=None, **kwargs):
        super().__init__(**kwargs)
        self.query_chunk = int(query_chunk) if query_chunk else None
        self.rotary_theta = float(rotary_theta) if rotary_theta else None
        self.window = int(window) if window else None
        self.rotary = None
        if self.rotary_theta:
            self.rotary = RotaryEmbedding(self.rotary_theta, dtype=self.dtype_policy,
                                          name="rotary")
        self.num_heads = num_heads
        self.dropout = dropout
        self.initializer_range = initializer_range
        # False: projections without biases (the Transformer's W^Q, W^K,
        # W^V, W^O; Model Garden's Seq2SeqTransformer).
        self.use_bias = bool(use_bias)
        # The probabilities are float32 (softmax computes in float32): under
        # a mixed policy their dropout stays there (`layers.precision`).
        self.dropout_layer = FastDropout(
            dropout, dtype=full_precision_policy(self.dtype_policy), name="attention_dropout"
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
        self.qkv_dense = FusedDense(
            3 * hidden_dim,
            use_bias=self.use_bias,
            kernel_initializer=init,
            dtype=self.dtype_policy,
            name="qkv",
        )
        self.output_dense = FusedDense(
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
        query, key, value = self.project(x)
        if self.rotary is not None:
            query, key = self.rotary(query), self.rotary(key)
        if query_positions is not None:
            # Only these rows attend (keys and values stay at every
            # position): the output equals the full layer's at those rows.
            index = ops.cast(query_positions, "int32")[:, :, None, None]
            query = ops.take_along_axis(query, index, axis=1)
        if self.window is not None:
            if query_positions is None and not return_attention_scores:
                return self.attend_window(query, key, value, attention_bias, training)
            # The full matrix with the window as a mask: the same values.
            band = band_bias(query_positions, ops.shape(key)[1], self.window)
            attention_bias = band if attention_bias is None else ops.minimum(
                ops.cast(attention_bias, "float32"), band)
        elif self.chunks_queries(query, attention_bias, training, query_positions,
                                 return_attention_scores):
            return self.attend_chunked(query, key, value, attention_bias)
        return self.attend(query, key, value, attention_bias, training=training,
                           return_attention_scores=return_attention_scores)

    def attend_window(self, query, key, value, attention_bias=None, training=None):
        """`attend` within the sliding window, block by block
        (`windowed_attention`); `attention_bias` is the [B, 1, 1, T]
        padding bias or None."""
        shape = ops.shape(query)
        query = query * ops.cast(1.0 / math.sqrt(self.head_dim), query.dtype)
        key_bias = None if attention_bias is None else attention_bias[:, 0, 0, :]
        context = windowed_attention(query, key, value, key_bias, self.window,
                                     self.dropout_layer, training)
        return self.output_dense(ops.reshape(context, (shape[0], shape[1], self.hidden_dim)))

    def chunks_queries(self, query, attention_bias, training, query_positions,
                       return_scores):
        """Whether `call` takes the query-chunked path (see `query_chunk`)."""
        if self.query_chunk is None or query_positions is not None or return_scores:
            return False
        if self.dropout > 0 and training:
            return False
        if attention_bias is not None and tuple(attention_bias.shape[1:3]) != (1, 1):
            return False
        length = query.shape[1]
        return length is None or length > self.query_chunk

    def attend_chunked(self, query, key, value, attention_bias=None):
        """`attend` with the queries in chunks of `query_chunk`
        (`query_chunked_attention`); `attention_bias` is the [B, 1, 1, T]
        padding bias or None."""
        shape = ops.shape(query)
        query = query * ops.cast(1.0 / math.sqrt(self.head_dim), query.dtype)
        key_bias = None if attention_bias is None else attention_bias[:, 0, 0, :]
        context = query_chunked_attention(query, key, value, key_bias, self.query_chunk)
        return self.output_dense(ops.reshape(context, (shape[0], shape[1], self.hidden_dim)))

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
        probs = kernels.attention_probabilities(
            query, key, attention_bias, fused=not training and not return_attention_scores)
        context = ops.einsum("bnts,bsnd->btnd", self.drop_probabilities(probs, training), value)
        context = ops.reshape(context, (shape[0], shape[1], self.hidden_dim))
        output = self.output_dense(context)
        if return_attention_scores:
            return output, probs
        return output

    def drop_probabilities(self, probs, training):
        """Dropout on attention probabilities `probs` (float32, or the
        compute dtype from the fused softmax), returned in the compute dtype
        for the product with the values. Outside training the dropout layer
        is not called: casting its input to float32 would cost two passes
        over the block's largest tensor for nothing."""
        if training and self.dropout > 0:
            probs = self.dropout_layer(probs, training=training)
        return ops.cast(probs, self.compute_dtype)

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
        if self.rotary_theta or self.window:
            config.update(rotary_theta=self.rotary_theta, window=self.window)
        if self.query_chunk:
            config["query_chunk"] = self.query_chunk
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
            return FusedDense(width, use_bias=self.use_bias, kernel_initializer=init,
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
