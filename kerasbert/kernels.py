"""The hot operations of a training step, each behind one function.

Model code (kerasbert.layers, kerasbert.models) is keras.ops only, so every
backbone runs under any Keras backend. Some operations of a pretraining step
have a faster form under TensorFlow that keras.ops cannot express; the
function takes that form under TensorFlow and is the plain Keras computation
everywhere else (tests/test_kernels.py checks that they agree). The
language-model loss (`decoder_cross_entropy`) picks the layout of its
decoder product itself; heads and tasks never see it. The Reformer's
reversible layers (`reversible_layers`) take a memory-saving form: a
backward pass that recomputes activations instead of keeping them.

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

At inference three operations of every encoder block also take a fused
form under TensorFlow with oneDNN (the default on x86 CPUs): a dense layer's
product, bias and activation (`dense`), the attention softmax
(`attention_softmax`) and LayerNorm (`layer_norm`). A bert_base block at
[8, 512] on 2 AVX512_BF16 cores: float32 212 -> 189 ms, bfloat16 140 -> 112
ms with the first two; the 12-layer encoder at [8, 512] with LayerNorm fused
too: float32 2005 -> 1985 ms, bfloat16 1178 -> 1101 ms.
"""

import functools
import math

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
    label_logit = ops.take_along_axis(fixed, labels, axis=axis)
    peak = ops.max(fixed, axis=axis, keepdims=True)
    hits = ops.cast(ops.greater_equal(label_logit, peak), "float32")

    @ops.custom_gradient
    def cross_entropy(logits):
        # log(sum(exp(logits))) - logits[label], stable around the peak.
        # Its gradient, softmax - one_hot(label), reuses the exponentials.
        exp = ops.exp(logits - peak)
        total = ops.sum(exp, axis=axis, keepdims=True)

        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            one_hot = ops.one_hot(
                ops.squeeze(labels, axis), ops.shape(logits)[axis], axis=axis, dtype="float32"
            )
            return (exp / total - one_hot) * ops.expand_dims(upstream, axis)

        return ops.squeeze(ops.log(total) + peak - label_logit, axis), grad

    return cross_entropy(logits), ops.squeeze(hits, axis)


def reversible_layers(functions, x1, x2, weights, recompute=True):
    """Reversible residual layers: for each layer i, y1 = x1 + F_i(x2),
    y2 = x2 + G_i(y1) (RevNet; kerasbert.layers.ReversibleSequence).

    Under TensorFlow with `recompute`, one custom gradient spans the stack:
    the forward pass keeps only the last pair, and the backward pass walks
    the layers in reverse, rebuilding each input from its output (x2 =
    y2 - G(y1), x1 = y1 - F(x2)) and taking the layer's local gradient from
    that recomputation, so activation memory is one layer's whatever the
    depth. Elsewhere (or `recompute=False`) the same functions compose
    under ordinary automatic differentiation.

    Args:
        functions: [(F_i, G_i)], each `(x, weight values) -> same shape`,
            pure: any randomness must be fixed by the caller (the same
            draws in the forward pass and the recomputation).
        x1, x2: float [B, T, H], the two streams.
        weights: [(F_i's values, G_i's values)], lists of tensors (the
            variables' values; gradients flow to them).

    Returns:
        [(y1, y2)] of every layer.
    """
    if not recompute or keras.config.backend() != "tensorflow":
        outputs = []
        for (f, g), (f_w, g_w) in zip(functions, weights):
            x1 = x1 + f(x2, f_w)
            x2 = x2 + g(x1, g_w)
            outputs.append((x1, x2))
        return outputs
    return _reversible_layers_tf(functions, x1, x2, weights)


def _reversible_layers_tf(functions, x1, x2, weights):
    import tensorflow as tf

    layers = len(functions)
    counts = [(len(f_w), len(g_w)) for f_w, g_w in weights]
    flat = [w for pair in weights for ws in pair for w in ws]

    def unflatten(values):
        out, start = [], 0
        for nf, ng in counts:
            out.append((list(values[start:start + nf]), list(values[start + nf:start + nf + ng])))
            start += nf + ng
        return out

    def vjp(fn, x, w, cotangent):
        """(fn(x, w), d/dx, d/dw) with `cotangent` as the output gradient."""
        with tf.GradientTape() as tape:
            tape.watch([x] + w)
            out = fn(x, w)
        grads = tape.gradient(out, [x] + w, output_gradients=cotangent,
                              unconnected_gradients="zero")
        return out, grads[0], grads[1:]

    @tf.custom_gradient
    def stack(x1, x2, *flat_weights):
        if tf.executing_eagerly():
            # Eagerly, tf.custom_gradient runs this forward pass while the
            # caller's tape records: every op of every layer would be taped
            # with its activations (memory growing with depth, as without
            # recomputation). Inputs cut from the tape keep it out; the
            # gradient is `grad`'s either way.
            x1, x2 = tf.stop_gradient(x1), tf.stop_gradient(x2)
            flat_weights = [tf.stop_gradient(w) for w in flat_weights]
        per_layer = unflatten(flat_weights)
        outputs = []
        for (f, g), (f_w, g_w) in zip(functions, per_layer):
            x1 = x1 + f(x2, f_w)
            x2 = x2 + g(x1, g_w)
            outputs += [x1, x2]
        y1, y2 = x1, x2

        def grad(*upstream):
            # upstream: the gradients of every layer's (y1, y2). Only the
            # last pair was kept; earlier gradients join at their layer.
            b1, b2 = y1, y2
            dy1, dy2 = upstream[-2], upstream[-1]
            grads = [None] * layers
            for i in reversed(range(layers)):
                if i < layers - 1:
                    dy1, dy2 = dy1 + upstream[2 * i], dy2 + upstream[2 * i + 1]
                # Layer i is recomputed only once layer i + 1's gradients
                # (input and weights) exist: without the dependency a graph
                # executor may run every inversion first, or put weight
                # gradients off, and hold many layers' activations.
                done = [dy1, dy2] + ([g for gs in grads[i + 1] for g in gs]
                                     if i < layers - 1 else [])
                with tf.control_dependencies(done):
                    b1, b2 = tf.identity(b1), tf.identity(b2)
                (f, g), (f_w, g_w) = functions[i], per_layer[i]
                g_out, d_b1, d_g = vjp(g, b1, g_w, dy2)   # G from y1; x2 = y2 - G(y1)
                a2 = b2 - g_out
                dy1 = dy1 + d_b1
                f_out, d_a2, d_f = vjp(f, a2, f_w, dy1)   # F from x2; x1 = y1 - F(x2)
                b1, b2 = b1 - f_out, a2
                dy2 = dy2 + d_a2
                grads[i] = (d_f, d_g)
            return [dy1, dy2] + [g for pair in grads for gs in pair for g in gs]

        return outputs, grad

    flat_outputs = stack(x1, x2, *flat)
    return [(flat_outputs[2 * i], flat_outputs[2 * i + 1]) for i in range(layers)]


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


@ops.custom_gradient
def _gelu_with_gradient(x):
    cdf = 0.5 * (1.0 + ops.erf(x / math.sqrt(2.0)))

    def grad(*args, upstream=None):
        if upstream is None:
            (upstream,) = args
        pdf = ops.exp(-0.5 * ops.square(x)) * (1.0 / math.sqrt(2.0 * math.pi))
        return upstream * (cdf + x * pdf)

    return x * cdf, grad


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
