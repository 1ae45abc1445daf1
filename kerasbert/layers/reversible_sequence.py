"""Reversible residual layers (RevNet; Gomez et al., 2017), as the Reformer.

The input is two streams (x1, x2) of the same shape; layer i computes

    y1 = x1 + F_i(x2)        (F: attention)
    y2 = x2 + G_i(y1)        (G: feed-forward)

and its input can be recovered from its output, x2 = y2 - G_i(y1) and
x1 = y1 - F_i(x2). So training does not have to keep every layer's
activations for the backward pass: the gradient runs the layers in reverse,
recomputes each one's input from its output, and takes the layer's local
gradient from that recomputation. Activation memory is then one layer's,
whatever the depth, for about one extra forward pass of compute.

Randomness must be the same in the forward pass and the recomputation
(dropout masks, the LSH rotations). Every training call therefore draws one
seed from the layer's `SeedGenerator` and runs each branch with
`stateless_call`, its seed states set from that seed and the branch's index:
both passes see identical draws, and each step draws fresh ones.

The recomputing backward pass is a `tf.custom_gradient` on the TensorFlow
backend (the one `kerasbert pretrain` and `fit` train with). On other
backends, and with `recompute=False`, the same stateless branches run under
ordinary automatic differentiation: the same numbers, with memory that
grows with depth (tests/layers/test_reversible_sequence.py compares the two).
"""

import keras
from keras import ops

# Seed offset between two branches (each branch draws fewer seeds than this).
_SEED_STRIDE = 1009


@keras.saving.register_keras_serializable(package="kerasbert")
class ReversibleSequence(keras.layers.Layer):
    """A stack of reversible residual layers.

    Args:
        attention_branches: list of L layers F_i, called as
            `F_i(x, padding_mask=mask, training=...)` -> same shape.
        feed_forward_branches: list of L layers G_i, called as
            `G_i(x, training=...)` -> same shape.
        recompute: bool. Train with the recomputing backward pass (memory
            flat in depth); False: ordinary backpropagation.
        seed: int, of the training seed stream.

    Call args:
        x1, x2: float [B, T, H], the two streams.
        padding_mask: int [B, T], 1 for real tokens.
        training: bool.

    Returns:
        list of L pairs (y1, y2), each layer's output. In the recomputing
        mode all of them leave one gradient function, whose backward pass
        keeps only the last pair (gradients arriving at earlier pairs join
        the reverse sweep at their layer), so returning them costs no
        memory per layer.
    """

    def __init__(self, attention_branches, feed_forward_branches, recompute=True, seed=0,
                 **kwargs):
        super().__init__(**kwargs)
        if len(attention_branches) != len(feed_forward_branches):
            raise ValueError(f"{len(attention_branches)} attention branches but "
                             f"{len(feed_forward_branches)} feed-forward branches.")
        self.attention_branches = list(attention_branches)
        self.feed_forward_branches = list(feed_forward_branches)
        self.recompute = bool(recompute)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def build(self, x1_shape, x2_shape=None, padding_mask_shape=None):
        for f, g in zip(self.attention_branches, self.feed_forward_branches):
            f.build(x1_shape)
            g.build(x1_shape)
        self.built = True

    @property
    def branches(self):
        """[F_0, G_0, F_1, G_1, ...]: the order of the seed offsets."""
        return [b for pair in zip(self.attention_branches, self.feed_forward_branches)
                for b in pair]

    # --- one branch, stateless ------------------------------------------------

    def _seeded_states(self, branch, index, seed):
        """The branch's non-trainable values: every one is a seed state
        (Dense, LayerNormalization, Dropout and the attentions keep no other
        state), set from the call's seed and the branch's index."""
        states = []
        for k, v in enumerate(branch.non_trainable_variables):
            offset = ops.convert_to_tensor([index * _SEED_STRIDE + k, 0], dtype=v.dtype)
            states.append(ops.cast(seed, v.dtype) + offset)
        return states

    def _run(self, index, x, weights, seed, padding_mask=None):
        """Branch `index` (of `branches`) on x with the given trainable
        values, its randomness fixed by `seed`."""
        branch = self.branches[index]
        kwargs = {"training": True}
        if index % 2 == 0:
            kwargs["padding_mask"] = padding_mask
        out, _ = branch.stateless_call(weights, self._seeded_states(branch, index, seed), x,
                                       **kwargs)
        return out

    # --- forward ---------------------------------------------------------------

    def call(self, x1, x2, padding_mask=None, training=None):
        if not training:
            outputs = []
            for f, g in zip(self.attention_branches, self.feed_forward_branches):
                x1 = x1 + f(x2, padding_mask=padding_mask, training=training)
                x2 = x2 + g(x1, training=training)
                outputs.append((x1, x2))
            return outputs
        seed = self.seed_generator.next()
        weights = [[v.value for v in b.trainable_variables] for b in self.branches]
        if self.recompute and keras.backend.backend() == "tensorflow":
            return self._reversible_tf(x1, x2, padding_mask, weights, seed)
        outputs = []
        for i in range(len(self.attention_branches)):
            x1 = x1 + self._run(2 * i, x2, weights[2 * i], seed, padding_mask)
            x2 = x2 + self._run(2 * i + 1, x1, weights[2 * i + 1], seed)
            outputs.append((x1, x2))
        return outputs

    def _reversible_tf(self, x1, x2, padding_mask, weights, seed):
        import tensorflow as tf

        counts = [len(w) for w in weights]
        flat = [w for ws in weights for w in ws]
        layers = len(self.attention_branches)
        if padding_mask is None:
            padding_mask = tf.ones(tf.shape(x1)[:2], tf.int32)

        def unflatten(values):
            out, start = [], 0
            for n in counts:
                out.append(list(values[start:start + n]))
                start += n
            return out

        @tf.custom_gradient
        def stack(x1, x2, mask, *flat_weights):
            per_branch = unflatten(flat_weights)
            outputs = []
            for i in range(layers):
                x1 = x1 + self._run(2 * i, x2, per_branch[2 * i], seed, mask)
                x2 = x2 + self._run(2 * i + 1, x1, per_branch[2 * i + 1], seed)
                outputs += [x1, x2]
            y1, y2 = x1, x2

            def grad(*upstream):
                # upstream: the gradients of every layer's (y1, y2); the
                # backward pass keeps only the last pair and inverts.
                b1, b2 = y1, y2
                dy1, dy2 = upstream[-2], upstream[-1]
                grads = [None] * (2 * layers)
                for i in reversed(range(layers)):
                    if i < layers - 1:
                        dy1, dy2 = dy1 + upstream[2 * i], dy2 + upstream[2 * i + 1]
                    # Layer i is recomputed only once layer i + 1's gradients
                    # (input and weights) exist: without the dependency a
                    # graph executor may run every inversion first, or put
                    # weight gradients off, and hold many layers' activations.
                    done = [dy1, dy2] + [g for gs in grads[2 * i + 2:2 * i + 4] for g in gs]
                    with tf.control_dependencies(done):
                        b1, b2 = tf.identity(b1), tf.identity(b2)
                    # G: recompute from y1, then x2 = y2 - G(y1).
                    g_w = per_branch[2 * i + 1]
                    with tf.GradientTape() as tape:
                        tape.watch([b1] + g_w)
                        g_out = self._run(2 * i + 1, b1, g_w, seed)
                    d_b1, *d_g = tape.gradient(g_out, [b1] + g_w, output_gradients=dy2,
                                               unconnected_gradients="zero")
                    a2 = b2 - g_out
                    dy1 = dy1 + d_b1
                    # F: recompute from x2, then x1 = y1 - F(x2).
                    f_w = per_branch[2 * i]
                    with tf.GradientTape() as tape:
                        tape.watch([a2] + f_w)
                        f_out = self._run(2 * i, a2, f_w, seed, mask)
                    d_a2, *d_f = tape.gradient(f_out, [a2] + f_w, output_gradients=dy1,
                                               unconnected_gradients="zero")
                    b1, b2 = b1 - f_out, a2
                    dy2 = dy2 + d_a2
                    grads[2 * i], grads[2 * i + 1] = d_f, d_g
                flat_grads = [g for gs in grads for g in gs]
                return [dy1, dy2, None] + flat_grads

            return outputs, grad

        flat_outputs = stack(x1, x2, padding_mask, *flat)
        return [(flat_outputs[2 * i], flat_outputs[2 * i + 1]) for i in range(layers)]

    def compute_output_shape(self, x1_shape, x2_shape=None, padding_mask_shape=None):
        return [(tuple(x1_shape), tuple(x1_shape))] * len(self.attention_branches)

    def get_config(self):
        config = super().get_config()
        config.update({
            "attention_branches": [keras.saving.serialize_keras_object(b)
                                   for b in self.attention_branches],
            "feed_forward_branches": [keras.saving.serialize_keras_object(b)
                                      for b in self.feed_forward_branches],
            "recompute": self.recompute, "seed": self.seed,
        })
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in ("attention_branches", "feed_forward_branches"):
            config[key] = [keras.saving.deserialize_keras_object(b) for b in config[key]]
        return cls(**config)
