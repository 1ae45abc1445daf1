"""The language-model loss's kernels: the decoder product in the layout
TensorFlow differentiates cheaply, and cross-entropy over a vocabulary
(see `kerasbert.kernels`).

Cross-entropy over a vocabulary (`token_cross_entropy`) has its gradient
written by hand: language-model heads score positions against the whole
vocabulary, so their loss runs over [N, V] logits with V = 30522 or 50265,
the largest elementwise work of a pretraining step. The forward pass is one
max, one exp and one sum, and the backward reuses the exponentials (softmax
- one_hot) instead of differentiating through them; top-1 hits come from
the same max instead of an argmax. Forward + backward of 320 x 30522 logits
on 2 CPU cores, against `keras.losses.sparse_categorical_crossentropy` +
argmax: TensorFlow 66 -> 28 ms, TensorFlow with XLA 50 -> 22 ms, JAX 97 ->
51 ms.
"""

import keras
from keras import ops

from kerasbert.kernels.tape_gradient import custom_gradient


def matmul_transposed(x, kernel):
    """x @ kernel^T: float [..., E] times a [V, E] kernel -> [..., V].

    Under TensorFlow this is one MatMul with `transpose_b`, so the kernel's
    gradient comes out as [V, E]. `ops.matmul(x, ops.transpose(kernel))`
    (the portable form; keras.ops has no transposed matmul) also
    transposes the [E, V] gradient back: for a tied 30522 x 256 decoder
    ~20 ms of a ~600 ms bert_mini pretraining step on 2 CPU cores
    without XLA.
    """
    if keras.config.backend() != "tensorflow":
        return ops.matmul(x, ops.transpose(kernel))
    import tensorflow as tf

    flat = tf.reshape(x, [-1, tf.shape(x)[-1]])
    product = tf.matmul(flat, kernel, transpose_b=True)
    return tf.reshape(product, tf.concat([tf.shape(x)[:-1], tf.shape(kernel)[:1]], axis=0))


def tied_decoder_table(token_embedding):
    """The [V, E] table that `token_embedding(x, reverse=True)` multiplies
    by, for a `keras.layers.ReversibleEmbedding` tied with no soft cap or
    reverse dtype (as every kerasbert backbone's is); None when its reverse
    call does more than that product."""
    table = token_embedding
    if (not table.tie_weights or table.logit_soft_cap is not None
            or table.reverse_dtype is not None):
        return None
    return table.embeddings


def _decoder_table(decoder):
    """The [V, E] table of a decoder: a table itself, or a tied
    `ReversibleEmbedding` whose reverse call is that product (None when it
    does more, e.g. a soft cap: then the layer is called)."""
    if isinstance(decoder, keras.layers.Layer):
        return tied_decoder_table(decoder)
    return decoder


def decoder_logits(x, decoder, bias=None):
    """float32 scores of x against every row of a decoder: [..., E] ->
    [..., V].

    Args:
        x: float [..., E], hidden states.
        decoder: a [V, E] table (an untied head's kernel) or a tied
            `keras.layers.ReversibleEmbedding` (the backbone's token
            embedding).
        bias: optional float [V].
    """
    table = _decoder_table(decoder)
    if table is None:
        logits = decoder(x, reverse=True)
    else:
        logits = matmul_transposed(x, ops.cast(table, x.dtype))
    logits = ops.cast(logits, "float32")
    return logits if bias is None else logits + ops.cast(bias, "float32")


def decoder_cross_entropy(x, labels, decoder, bias=None):
    """Per-position cross-entropy of `labels` under `decoder_logits(x,
    decoder, bias)`, and whether each label is top-1: the language-model
    loss of every head, through this one function.

    The logits are never materialised as [..., V]: the product runs
    vocabulary-major, [V, N] = table @ x^T for the N = prod(x.shape[:-1])
    rows, with the bias and the cross-entropy reduced over V in that
    layout. XLA on a CPU runs the product, the bias gradient and the
    reductions over V much faster this way (decoder + bias +
    cross-entropy, forward and backward, 320 x 256 rows against 30522:
    168 -> 110 ms with XLA, 259 -> 198 ms under JAX, no change without
    XLA; bench/README.md), and the same numbers come out.

    Args:
        x: float [..., E].
        labels: int [...] (x's shape without E), in [0, V).
        decoder, bias: as `decoder_logits`.

    Returns:
        (cross_entropy, hits): float32, labels' shape each (`token_cross_entropy`).
    """
    table = _decoder_table(decoder)
    if table is None:
        return token_cross_entropy(decoder_logits(x, decoder, bias), labels)
    rows = ops.reshape(x, (-1, ops.shape(x)[-1]))
    by_vocab = ops.cast(ops.matmul(ops.cast(table, x.dtype), ops.transpose(rows)), "float32")
    if bias is not None:
        by_vocab = by_vocab + ops.expand_dims(ops.cast(bias, "float32"), -1)
    ce, hits = token_cross_entropy(by_vocab, ops.reshape(labels, (-1,)), axis=0)
    shape = ops.shape(labels)
    return ops.reshape(ce, shape), ops.reshape(hits, shape)


def token_cross_entropy(logits, labels, axis=-1):
    """Per-position cross-entropy of `labels` and whether each is top-1.

    Args:
        logits: float tensor with the vocabulary on `axis` (computed in
            float32 whatever the dtype): [..., V] by default, or e.g. the
            vocabulary-major [V, N] of `decoder_cross_entropy` with axis=0.
        labels: int tensor of the logits' shape without `axis`, in [0, V).
        axis: int, the vocabulary axis of `logits`.

    Returns:
        (cross_entropy, hits): float32, `labels`' shape each. `hits` is 1
        where the label's logit is the largest (ties count as hits, where
        `argmax` would pick the first of them; for real-valued logits the
        two agree). `hits` carries no gradient.
    """
    logits = ops.cast(logits, "float32")
    axis = axis % len(logits.shape)
    labels = ops.expand_dims(ops.cast(labels, "int32"), axis)
    fixed = ops.stop_gradient(logits)
    peak = ops.max(fixed, axis=axis, keepdims=True)
    hits = ops.cast(ops.greater_equal(ops.take_along_axis(fixed, labels, axis=axis), peak),
                    "float32")

    @custom_gradient
    def cross_entropy(logits):
        # log(sum(exp(logits))) - logits[label], stable around the peak.
        # Its gradient, softmax - one_hot(label), reuses the exponentials.
        # Written so that differentiating it gives the same (the label's
        # logit from `logits`): a gradient taken without a tape does.
        exp = ops.exp(logits - peak)
        total = ops.sum(exp, axis=axis, keepdims=True)
        label_logit = ops.take_along_axis(logits, labels, axis=axis)

        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            one_hot = ops.one_hot(
                ops.squeeze(labels, axis), ops.shape(logits)[axis], axis=axis, dtype="float32"
            )
            return (exp / total - one_hot) * ops.expand_dims(upstream, axis)

        return ops.squeeze(ops.log(total) + peak - label_logit, axis), grad

    return cross_entropy(logits), ops.squeeze(hits, axis)
