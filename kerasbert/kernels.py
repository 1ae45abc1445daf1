"""Backend-specialised forms of two hot operations the layers use.

Model code (kerasbert.layers, kerasbert.models) is keras.ops only, so every
backbone runs under any Keras backend. Two operations of a pretraining step
have a faster form under TensorFlow that keras.ops cannot express; each
function here takes that form under TensorFlow and is the plain Keras
computation everywhere else (tests/test_kernels.py checks that they agree).
The tied decoder's functions also choose the layout of the product.
"""

import keras
from keras import ops


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


def decoder_logits(x, table, vocabulary_major=False):
    """Scores of x against every row of a [V, E] decoder table, in x's dtype.

    Args:
        x: float [..., E]; [N, E] with `vocabulary_major`.
        table: float [V, E].
        vocabulary_major: bool. Return [V, N] (table @ x^T) instead of
            [..., V]. A language-model loss reads logits along V, and XLA on
            a CPU runs the product, the bias gradient and the reductions
            over V much faster in this layout (a 320 x 256 by 30522 x 256
            product: 78 -> 19 ms with XLA; 2048 rows by 40478: 353 -> 237
            ms with XLA and 309 -> 210 ms without, on 2 cores).

    Returns:
        [..., V], or [V, N] with `vocabulary_major`.
    """
    table = ops.cast(table, x.dtype)
    if vocabulary_major:
        return ops.matmul(table, ops.transpose(x))
    return matmul_transposed(x, table)


def batch_major(logits, leading_shape):
    """The [V, N] logits of `decoder_logits(..., vocabulary_major=True)` as
    [*leading_shape, V] (N = the product of `leading_shape`)."""
    return ops.reshape(ops.transpose(logits), tuple(leading_shape) + (-1,))


def tied_decoder_logits(x, token_embedding, vocabulary_major=False):
    """What `token_embedding(x, reverse=True)` gives (x's dtype), through
    `decoder_logits` when `tied_decoder_table` has the table, Keras' call
    otherwise; transposed to [V, N] for [N, E] rows with
    `vocabulary_major`."""
    table = tied_decoder_table(token_embedding)
    if table is not None:
        return decoder_logits(x, table, vocabulary_major)
    logits = token_embedding(x, reverse=True)
    return ops.transpose(logits) if vocabulary_major else logits


def dropout(inputs, rate, seed_generator):
    """Training-time dropout of `inputs` (scaled by 1 / (1 - rate)).

    Args:
        inputs: float tensor.
        rate: float in [0, 1] (1 drops everything).
        seed_generator: a `keras.random.SeedGenerator`; each call draws the
            next seed from it, so runs are reproducible.

    Keras draws the mask with `tf.nn.experimental.stateless_dropout`:
    uniform floats from the "auto_select" generator, which under XLA on a
    CPU is ThreeFry. Under TensorFlow the mask here is 32 Philox bits per
    element compared with the integer floor(rate * 2^32) (an element is
    kept with probability 1 - rate to within 2^-32), applied as one
    multiply by the scaled 0/1 mask, whose gradient is the same multiply.
    Measured on 2 CPU cores, forward and backward of a 1M-element mask (the
    attention probabilities of one bert_mini layer at batch 16, T = 128):
    14 ms with XLA for Keras', 7.7 ms for this; ~6 ms each without XLA.
    Other backends use `keras.random.dropout`. The masks differ from
    Keras' for the same seed; the distribution is the same.
    """
    if rate <= 0:
        return inputs
    if rate >= 1:  # everything dropped (as Keras does)
        return ops.zeros_like(inputs)
    if keras.config.backend() != "tensorflow":
        return keras.random.dropout(inputs, rate, seed=seed_generator)
    import tensorflow as tf

    seed = tf.cast(seed_generator.next(), tf.int32)
    bits = tf.random.stateless_uniform(
        tf.shape(inputs), seed, minval=None, maxval=None, dtype=tf.uint32, alg="philox"
    )
    threshold = tf.constant(min(int(rate * 2.0**32), 2**32 - 1), tf.uint32)
    keep = tf.cast(bits >= threshold, inputs.dtype)
    return inputs * (keep * tf.cast(1.0 / (1.0 - rate), inputs.dtype))
