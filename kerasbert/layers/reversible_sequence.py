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

The recomputing backward pass is `kerasbert.kernels.reversible_layers`, a
custom gradient of the TensorFlow backend (the one `kerasbert pretrain` and
`fit` train with). On other backends, and with `recompute=False`, the same
stateless branches run under ordinary automatic differentiation: the same
numbers, with memory that grows with depth
(tests/models/reformer/test_reformer_backbone.py compares the two).
"""

import keras
from keras import ops

from kerasbert.kernels import reversible_layers

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

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import (ChunkedFeedForward, LocalSelfAttention,
    ...                               PreNormBranch, ReversibleSequence)
    >>> layers = ReversibleSequence(
    ...     [PreNormBranch(LocalSelfAttention(num_heads=2, chunk_length=4))],
    ...     [PreNormBranch(ChunkedFeedForward(intermediate_dim=16))])
    >>> x = np.zeros((2, 8, 8), "float32")                    # each stream [B, T, H]
    >>> pairs = layers(x, x, padding_mask=np.ones((2, 8), "int32"))
    >>> len(pairs), tuple(pairs[-1][0].shape)                 # L pairs (y1, y2)
    (1, (2, 8, 8))
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
        pairs = list(zip(self.attention_branches, self.feed_forward_branches))
        if not training:
            # The branches as they are (no randomness to fix, no gradient).
            functions = [(self._plain_call(f, padding_mask), self._plain_call(g))
                         for f, g in pairs]
            return reversible_layers(functions, x1, x2, [([], [])] * len(pairs),
                                     recompute=False)
        seed = self.seed_generator.next()
        functions, weights = [], []
        for i, (f, g) in enumerate(pairs):
            functions.append((self._branch_function(2 * i, seed, padding_mask),
                              self._branch_function(2 * i + 1, seed)))
            weights.append(([v.value for v in f.trainable_variables],
                            [v.value for v in g.trainable_variables]))
        return reversible_layers(functions, x1, x2, weights, recompute=self.recompute)

    @staticmethod
    def _plain_call(branch, padding_mask=None):
        """An inference branch as `(x, unused weights) -> out`."""
        kwargs = {} if padding_mask is None else {"padding_mask": padding_mask}
        return lambda x, _: branch(x, training=False, **kwargs)

    def _branch_function(self, index, seed, padding_mask=None):
        """Branch `index` as a pure function (x, trainable values) -> out."""
        return lambda x, weights: self._run(index, x, weights, seed, padding_mask)

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
