"""An encoder block's kernels: GELU with a written-out gradient, the dense
product, attention probabilities, LayerNorm and dropout with 16-bit draws
(see `kerasbert.kernels`).

At inference four operations of every encoder block also take a fused
form under TensorFlow with oneDNN (the default on x86 CPUs): a dense layer's
product, bias and activation (`dense`), the attention softmax
(`attention_softmax`), the padding bias inside the attention's product
(`attention_probabilities`) and LayerNorm (`layer_norm`). A bert_base block at
[8, 512] on 2 AVX512_BF16 cores: float32 212 -> 189 ms, bfloat16 140 -> 112
ms with the first two; the 12-layer encoder at [8, 512] with the last two
added: float32 2035 -> 1985 ms, bfloat16 1216 -> 1049 ms.
"""

import functools
import math

import keras
from keras import ops

from kerasbert.kernels.tape_gradient import custom_gradient


@functools.cache
def _onednn():
    """True when TensorFlow runs its CPU graphs through oneDNN (the default
    on x86 Linux; TF_ENABLE_ONEDNN_OPTS=0 turns it off), whose kernels
    compute bfloat16 softmax and fused activations in float32."""
    if keras.config.backend() != "tensorflow":
        return False
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:  # a TensorFlow without the probe: assume the plain kernels
        return False
    return bool(_pywrap_util_port.IsMklEnabled())


def gelu(x):
    """The exact GELU, x * Phi(x) with Phi the normal CDF, of float `x`.

    Under TensorFlow its gradient is written out, dy * (Phi(x) + x *
    phi(x)), reusing the forward pass's Phi(x), instead of TensorFlow
    differentiating through erf and its products. The all-MiniLM-L6-v2
    fine-tuning step ([32, 40], 2 AVX512_BF16 cores, medians of 8
    interleaved blocks, two runs): float32 367 -> 357 and 369 -> 360 ms,
    mixed_bfloat16 276 -> 264 and 272 -> 258 ms. Elsewhere it is Keras's
    (JAX's XLA fuses it, PyTorch's is one kernel with its own gradient).
    """
    if keras.config.backend() != "tensorflow":
        return keras.activations.gelu(x, approximate=False)
    return _gelu_with_gradient(x)


@custom_gradient
def _gelu_with_gradient(x):
    cdf = 0.5 * (1.0 + ops.erf(x / math.sqrt(2.0)))

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        pdf = ops.exp(-0.5 * ops.square(x)) * (1.0 / math.sqrt(2.0 * math.pi))
        return upstream * (cdf + x * pdf)

    return x * cdf, grad


# Below this width a feed-forward's activations are small enough that a
# compiled loop's launch and its compile per shape (~75 ms) cost more than
# the passes it saves; every published BERT size is above it (bert_tiny's
# 512 included), the tiny test models below.
COMPILED_GELU_MIN_WIDTH = 512


def compiled_gelu_applies(x):
    """True where `compiled_gelu` runs x as compiled loops: the TensorFlow
    backend with XLA, a float x whose last axis is statically at least
    `COMPILED_GELU_MIN_WIDTH` wide."""
    if keras.config.backend() != "tensorflow":
        return False
    width = x.shape[-1] if len(x.shape) else None
    dtype = keras.backend.standardize_dtype(x.dtype)
    return (width is not None and width >= COMPILED_GELU_MIN_WIDTH
            and dtype in ("float32", "bfloat16", "float16") and _xla_runs())


def compiled_gelu(x):
    """The exact GELU of float `x` for a training step (TensorFlow, see
    `compiled_gelu_applies`): x's shape and dtype.

    The forward pass and the backward pass are each one XLA-compiled loop
    that reads x in its own dtype, computes in float32 and writes once in
    x's dtype: x * Phi(x), and dy * (Phi(x) + x * phi(x)) recomputed from x.
    TensorFlow's kernels run each of those as its own pass over the
    [B, T, I] activations (erf, exp and five products and sums, and in
    bfloat16 four casts to float32 and back); only x is kept for the
    backward pass. One [32, 40, 1536] GELU, forward and backward, on 2
    AVX512_BF16 cores: float32 3.3 -> 2.7 ms, bfloat16 5.1 -> 2.4 ms. Same
    values as casting to float32 around `gelu` (XLA's erf is within an ulp
    of TensorFlow's). Not for inference: a saved serving graph would need
    XLA where it is served, and oneDNN fuses the GELU into the product
    there (`dense`).
    """
    return _compiled_gelu_with_gradient(x)


@functools.cache
def _compiled_gelu_passes():
    """(forward, backward): the two XLA-compiled tf.functions."""
    import tensorflow as tf

    def cdf(xf):
        return 0.5 * (1.0 + tf.math.erf(xf * (1.0 / math.sqrt(2.0))))

    @tf.function(jit_compile=True, autograph=False, reduce_retracing=True)
    def forward(x):
        xf = tf.cast(x, tf.float32)
        return tf.cast(xf * cdf(xf), x.dtype)

    @tf.function(jit_compile=True, autograph=False, reduce_retracing=True)
    def backward(x, upstream):
        xf = tf.cast(x, tf.float32)
        pdf = tf.exp(-0.5 * xf * xf) * (1.0 / math.sqrt(2.0 * math.pi))
        return tf.cast(tf.cast(upstream, tf.float32) * (cdf(xf) + xf * pdf), x.dtype)

    return forward, backward


@functools.cache
def _xla_runs():
    """True when this TensorFlow compiles and runs XLA on the host (its
    builds for Linux and macOS do); probed once, eagerly."""
    import tensorflow as tf

    forward, _ = _compiled_gelu_passes()
    try:
        with tf.init_scope():
            forward(tf.zeros([2], tf.float32)).numpy()
    except Exception:  # any failure to compile or run: take TensorFlow's kernels
        return False
    return True


@custom_gradient
def _compiled_gelu_with_gradient(x):
    forward, backward = _compiled_gelu_passes()
    return forward(x), lambda upstream: backward(x, upstream)


def dense(x, kernel, bias=None, activation=None, fused_activation=None):
    """activation(x @ kernel + bias): float [..., I] -> [..., O].

    Under TensorFlow this is one 2-D MatMul, a BiasAdd and the activation
    on the 2-D product, the pattern grappler's remapper fuses into a single
    oneDNN kernel (`_FusedMatMul`). Keras's Dense multiplies a [B, T, I]
    input through tensordot and adds its bias with AddV2 on the 3-D result,
    which stays three kernels and one more pass over the output.

    Args:
        x: float [..., I].
        kernel: [I, O]; bias: [O] or None.
        activation: a function of the product, or None.
        fused_activation: the same function without its own float32 casts,
            applied instead of `activation` where the backend computes it
            inside the product's kernel (oneDNN computes a fused GELU on
            the float32 accumulator and rounds once). Only outside
            training: a gradient needs the activation's input, which
            keeps the kernels apart, and an unfused half-precision GELU is
            emulated element by element.

    Measured on 2 AVX512_BF16 cores, [4096, 768] x [768, 3072] with GELU,
    Keras's form against this one: float32 79 -> 59 ms, bfloat16 97 -> 30
    ms (with the GELU cast to float32 and back instead: 50 ms).
    """
    if keras.config.backend() != "tensorflow":
        y = ops.matmul(x, kernel)
        if bias is not None:
            y = ops.add(y, bias)
        return y if activation is None else activation(y)
    import tensorflow as tf

    kernel = tf.cast(kernel, x.dtype)
    shape = tf.shape(x)
    y = tf.matmul(tf.reshape(x, [-1, tf.shape(kernel)[0]]), kernel)
    if bias is not None:
        y = tf.nn.bias_add(y, tf.cast(bias, x.dtype))
    if fused_activation is not None and _onednn():
        y = fused_activation(y)
    elif activation is not None:
        y = activation(y)
    return tf.reshape(y, tf.concat([shape[:-1], tf.shape(kernel)[1:]], axis=0))


def attention_probabilities(query, key, attention_bias=None, fused=False):
    """softmax(query . key + attention_bias) over the keys.

    Args:
        query: float [B, Q, N, D], already scaled; key: [B, S, N, D].
        attention_bias: broadcastable to [B, N, Q, S], or None.
        fused: outside training (see `attention_softmax`). Under
            TensorFlow with oneDNN a padding bias ([B, 1, 1, S]) also rides
            inside the product: the queries get two columns of ones and the
            keys two columns of half the key's bias, so the product's
            float32 accumulator adds the bias and no elementwise pass over
            the [B, N, Q, S] scores is left (two columns, not one: bfloat16
            products take the depth in pairs). Unmasked keys get exactly
            the same scores (their columns add 0); masked keys still get
            probability 0. bert_base at [8, 512], 12 layers: bfloat16 1112
            -> 1040 ms, float32 1968 -> 1945 ms.

    Returns:
        [B, N, Q, S]: float32, or with `fused` in the compute dtype.
    """
    if fused and _onednn() and _is_key_bias(attention_bias):
        query, key = _with_bias_columns(query, key, attention_bias)
        attention_bias = None
    scores = ops.einsum("btnd,bsnd->bnts", query, key)
    return attention_softmax(scores, attention_bias, fused)


def _is_key_bias(attention_bias):
    return (attention_bias is not None and len(attention_bias.shape) == 4
            and tuple(attention_bias.shape[1:3]) == (1, 1))


def _with_bias_columns(query, key, attention_bias):
    """query [B, Q, N, D + 2] with ones, key [B, S, N, D + 2] with half the
    [B, 1, 1, S] bias in each new column: their product is query . key +
    bias."""
    dtype = query.dtype
    half = ops.cast(ops.cast(attention_bias[:, 0, 0, :], "float32") * 0.5, dtype)
    q_shape, k_shape = ops.shape(query), ops.shape(key)
    ones = ops.ones((q_shape[0], q_shape[1], q_shape[2], 2), dtype)
    bias = ops.broadcast_to(half[:, :, None, None], (k_shape[0], k_shape[1], k_shape[2], 2))
    return ops.concatenate([query, ones], axis=-1), ops.concatenate([key, bias], axis=-1)


def attention_softmax(scores, attention_bias=None, fused=False):
    """Softmax over the last axis of `scores` + `attention_bias`, computed
    in float32.

    Args:
        scores: float [B, N, Q, S] in the compute dtype.
        attention_bias: broadcastable to `scores` (0 at keys to attend,
            `MASK_BIAS` at masked ones), or None.
        fused: outside training, under TensorFlow with oneDNN and bfloat16
            scores, hand the scores to the Softmax kernel as they are:
            oneDNN computes a bfloat16 softmax in float32 and rounds once,
            the same bits as casting to float32 first (0 of 201,326,592
            probabilities differed on [64, 12, 512, 512]) without the two
            casts over the largest tensor of the block (bert_base at 512:
            14 ms against 28 ms a layer). Training keeps the casts: the
            softmax gradient is elementwise work and a sum that would run in
            bfloat16. The bias holds 0 and MASK_BIAS, added in bfloat16:
            masked keys still get exactly 0, and only a fully padded row
            (whose outputs nothing reads) comes out evenly weighted.

    Returns:
        The probabilities: float32, or with `fused` in the scores' dtype.
    """
    dtype = keras.backend.standardize_dtype(scores.dtype)
    if fused and dtype == "bfloat16" and _onednn():
        if attention_bias is not None:
            scores = scores + ops.cast(attention_bias, dtype)
        return ops.softmax(scores, axis=-1)
    scores = ops.cast(scores, "float32")
    if attention_bias is not None:
        scores = scores + ops.cast(attention_bias, "float32")
    return ops.softmax(scores, axis=-1)


def layer_norm(x, gamma, beta, epsilon, fused=False):
    """LayerNorm over the last axis: (x - mean) / sqrt(var + epsilon) *
    gamma + beta, float [..., H] -> [..., H] in x's dtype (computed in at
    least float32, as Keras's `ops.layer_normalization`).

    Args:
        x: float [..., H].
        gamma, beta: [H], or None (no scale / no offset).
        epsilon: float.
        fused: outside training, under TensorFlow with oneDNN, write it as
            the op pattern grappler's remapper turns into one
            `_MklLayerNorm` kernel (a one-row-per-channel
            FusedBatchNormV3, then the scale and offset), which computes
            float32 statistics whatever x's dtype. Keras's form is ten
            elementwise ops and two reductions, each a pass over x; in
            bfloat16 each also casts. Applies to rank 2 and 3 inputs with
            both gamma and beta, float32 or bfloat16, whose width is
            known and whose row count is not fixed in the graph (a static
            count folds the pattern's Fill into a constant and the
            remapper no longer sees it; the serving signatures' batch and
            length are dynamic). bert_base
            at [8, 512], 4 layers, in a graph: float32 704 -> 664 ms,
            bfloat16 426 -> 381 ms; within 7e-6 of Keras's form in
            float32 (Keras's own error against float64 is 5e-6). A graph
            saved so runs on plain kernels too (a server without oneDNN).
    """
    if not (fused and _onednn() and _fusable_layer_norm(x, gamma, beta)):
        return ops.layer_normalization(x, gamma, beta, axis=-1, epsilon=epsilon)
    import tensorflow as tf

    shape = tf.shape(x)
    rows = tf.reduce_prod(shape[:-1])
    # Each row is one channel of an NCHW batch of one image: batch
    # statistics per channel are the row's mean and variance.
    channels = tf.reshape(x, tf.stack([1, rows, shape[-1], 1]))
    count = tf.reshape(rows, [1])
    empty = tf.constant([], tf.float32)
    normed = tf.raw_ops.FusedBatchNormV3(
        x=channels, scale=tf.fill(count, 1.0), offset=tf.fill(count, 0.0), mean=empty,
        variance=empty, epsilon=float(epsilon), data_format="NCHW", is_training=True)[0]
    return tf.reshape(normed, shape) * tf.cast(gamma, x.dtype) + tf.cast(beta, x.dtype)


def _fusable_layer_norm(x, gamma, beta):
    dtype = keras.backend.standardize_dtype(x.dtype)
    rows = x.shape[:-1]
    return (gamma is not None and beta is not None and dtype in ("float32", "bfloat16")
            and len(x.shape) in (2, 3) and x.shape[-1] is not None
            and any(d is None for d in rows))


def dropout(x, rate, seed_generator, noise_shape=None):
    """Inverted dropout of float `x`: each element is kept with probability
    1 - rate and scaled by 1 / (1 - rate), else zeroed.

    Under TensorFlow, when `noise_shape` is None and x's size is known to
    be even (a static even dimension: the hidden width, the heads), each
    element's draw is 16 random bits instead of a 32-bit float: one Philox
    draw of size / 2 uint32 values, read as size uint16 values, kept where
    the value is at least round(rate * 2**16). Half the random numbers, a
    uint16 comparison instead of a float one, and the rate rounded to a
    multiple of 2**-16 (0.1 -> 0.1000061; the scale uses the rounded rate,
    so the expected output is still x). The random draw was the largest op
    of an all-MiniLM-L6-v2 fine-tuning step after the products (2
    AVX512_BF16 cores, [32, 40]: float32 333 -> 322 ms, mixed_bfloat16 239
    -> 231 ms). Elsewhere it is `keras.random.dropout`.

    Args:
        x: float, any shape.
        rate: float in [0, 1).
        seed_generator: a `keras.random.SeedGenerator`; one draw per call.
        noise_shape: as `keras.random.dropout` (broadcast masks take
            Keras's path).

    Returns:
        x's shape and dtype.
    """
    if (keras.config.backend() != "tensorflow" or noise_shape is not None or not 0.0 < rate < 1.0
            or not any(d is not None and d % 2 == 0 for d in x.shape)):
        return keras.random.dropout(x, rate, noise_shape=noise_shape, seed=seed_generator)
    import tensorflow as tf

    # The generator's state is int64 under TensorFlow; stateless draws want
    # int32 seeds to compile under XLA (Keras folds them the same way).
    seed = tf.cast(tf.math.floormod(tf.cast(seed_generator.next(), tf.int64), 2**31 - 2), tf.int32)
    pairs = tf.reshape(tf.size(x) // 2, [1])
    bits = tf.random.stateless_uniform(pairs, seed=seed, minval=None, maxval=None,
                                       dtype=tf.uint32)
    bits = tf.reshape(tf.bitcast(bits, tf.uint16), tf.shape(x))
    threshold = min(2**16 - 1, round(rate * 2**16))
    keep = bits >= tf.constant(threshold, tf.uint16)
    scale = tf.cast(2**16 / (2**16 - threshold), x.dtype)
    return tf.where(keep, x * scale, tf.zeros((), x.dtype))
