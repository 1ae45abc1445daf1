"""The Reformer's reversible layers with a backward pass that recomputes
activations instead of keeping them (see `kerasbert.kernels`)."""

import keras

from kerasbert.kernels.tape_gradient import custom_gradient


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

    # `custom_gradient` runs this forward pass with the tapes stopped, also
    # eagerly (where tf.custom_gradient lets the caller's tape record every
    # op of every layer with its activations: memory growing with depth).
    @custom_gradient
    def stack(x1, x2, *flat_weights):
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
