"""The Reformer's LSH self-attention (Kitaev, Kaiser & Levskaya, 2020).

Per head, one projection gives both queries and keys (shared QK; keys are
the unit-normalised vectors), so similar vectors hash alike:

    scores    q . k / |k| (unit keys, the query's length kept, no 1/sqrt(d):
              the authors' code and the published checkpoints)
    buckets   angular LSH: the vectors are rotated by a random matrix
              R [d, b/2] and the bucket is argmax([xR, -xR]) in [0, b);
              `num_hashes` rounds with independent rotations; `num_buckets`
              may be a pair (b1, b2): two rotations, bucket i1 + b1 * i2, so
              b1 * b2 buckets from (b1 + b2) / 2 columns
    sort      each round by (bucket, position): similar vectors become
              neighbours; the rounds follow each other
    attend    in chunks of `chunk_length` to the own chunk and
              `num_chunks_before` / `num_chunks_after` neighbours
              (chunked_attention), never to the own position unless there
              is nothing else; causal and padding masks by position
    combine   the rounds' outputs, unsorted, weighted by the softmax over
              rounds of each round's log-sum-exp of scores (each round's
              share of the total attention mass)

Cost: O(num_hashes * T * chunk_length * (1 + before + after)) instead of
O(T^2). The rotations are drawn afresh at every training call (a
SeedGenerator) and from a fixed seed otherwise (NumPy's generator, the same on
every backend), so evaluation and exported
models are deterministic. A length that is not a multiple of
`chunk_length` is padded internally with masked positions and cut back.
"""

import math

import numpy as np

import keras
from keras import ops

from kerasbert.layers.chunked_attention import ChunkedSelfAttention
from kerasbert.layers.chunked_attention import merge_heads
from kerasbert.layers.chunked_attention import pad_to_chunks
from kerasbert.layers.chunked_attention import split_heads


def _bucket_factors(num_buckets):
    factors = (num_buckets,) if isinstance(num_buckets, int) else tuple(num_buckets)
    for f in factors:
        if f != 1 and (f < 2 or f % 2):
            raise ValueError(f"num_buckets {num_buckets!r}: every factor must be 1 or an even "
                             "number >= 2 (buckets come in +/- rotation pairs).")
    return factors


@keras.saving.register_keras_serializable(package="kerasbert")
class LSHSelfAttention(ChunkedSelfAttention):
    """Shared query/key self-attention over locality-sensitive hash buckets.

    Args:
        num_heads, chunk_length, num_chunks_before, num_chunks_after,
            causal, dropout, initializer_range: as ChunkedSelfAttention.
        num_hashes: int, hashing rounds (more: closer to full attention).
        num_buckets: int (even, or 1) or a pair (b1, b2) of them.
        seed: int, for the evaluation rotations and the training stream.

    Call args:
        x: float [B, T, H].
        padding_mask: int/bool [B, T], 1 for real tokens, or None.
        training: bool.

    Returns:
        float [B, T, H].

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import LSHSelfAttention
    >>> attention = LSHSelfAttention(num_heads=2, chunk_length=4, num_buckets=2)
    >>> x = np.zeros((2, 8, 8), "float32")                    # [B, T, H]
    >>> tuple(attention(x, padding_mask=np.ones((2, 8), "int32")).shape)   # [B, T, H]
    (2, 8, 8)
    """

    def __init__(self, num_heads, num_hashes=2, num_buckets=8, seed=0, **kwargs):
        super().__init__(num_heads, **kwargs)
        self.num_hashes = num_hashes
        self.num_buckets = num_buckets if isinstance(num_buckets, int) else list(num_buckets)
        self.factors = _bucket_factors(num_buckets)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    @property
    def total_buckets(self):
        return math.prod(self.factors)

    def build_projections(self, x_shape, initializer):
        self.query_key_dense = self.projection(x_shape, initializer, "query_key")
        self.value_dense = self.projection(x_shape, initializer, "value")

    def _rotations(self, training):
        """float32 [N, d, num_hashes, sum(f // 2)] random rotations."""
        width = sum(f // 2 for f in self.factors if f > 1)
        shape = (self.num_heads, self.head_dim, self.num_hashes, max(width, 1))
        if training:
            return keras.random.normal(shape, seed=self.seed_generator, dtype="float32")
        # NumPy's generator, not the backend's: the same buckets on every
        # backend, so a model evaluates (and exports) alike under
        # TensorFlow, JAX and PyTorch.
        rotations = np.random.default_rng(self.seed).standard_normal(shape).astype("float32")
        return ops.convert_to_tensor(rotations)

    def hash_buckets(self, vectors, training=None):
        """[B, N, T, d] -> int32 [B, N, num_hashes, T] buckets in
        [0, total_buckets) (round r's buckets are NOT offset here)."""
        shape = ops.shape(vectors)
        if self.total_buckets == 1:
            return ops.zeros((shape[0], shape[1], self.num_hashes, shape[2]), "int32")
        rotated = ops.einsum("bntd,ndrh->bnrth", ops.cast(vectors, "float32"),
                             self._rotations(training))
        buckets, start, scale = 0, 0, 1
        for f in self.factors:
            if f == 1:
                continue
            part = rotated[..., start:start + f // 2]
            index = ops.argmax(ops.concatenate([part, -part], axis=-1), axis=-1)
            buckets = buckets + ops.cast(index, "int32") * scale
            start, scale = start + f // 2, scale * f
        return buckets

    def call(self, x, padding_mask=None, training=None):
        length = ops.shape(x)[1]
        # Padded to a multiple of chunk_length with masked positions.
        x_in, valid, padded = pad_to_chunks(x, padding_mask, self.chunk_length)
        batch = ops.shape(x_in)[0]
        qk = split_heads(self.query_key_dense(x_in), self.num_heads)
        v = split_heads(self.value_dense(x_in), self.num_heads)

        # Each round sorted apart by (bucket, position): the keys are
        # distinct and below (total_buckets + 1) * T' (no int32 overflow at
        # 64k tokens and 8k buckets), and the rounds follow each other.
        # Padding goes to a bucket of its own after the others, so what the
        # padded positions hold never changes how real tokens are chunked.
        buckets = self.hash_buckets(qk, training)  # [B, N, R, T']
        buckets = ops.where(ops.reshape(valid, (batch, 1, 1, padded)), buckets,
                            self.total_buckets)
        keys = buckets * padded + ops.arange(padded, dtype="int32")
        order = ops.cast(ops.argsort(keys, axis=-1), "int32")  # positions, sorted
        undo = ops.argsort(order, axis=-1)
        pos = ops.reshape(order, (batch, self.num_heads, -1))  # [B, N, R*T']

        index = ops.expand_dims(pos, -1)
        sorted_qk = ops.take_along_axis(qk, index, axis=2)
        sorted_v = ops.take_along_axis(v, index, axis=2)
        # Scores are q . k_hat, k_hat the unit key, in float32: the key's
        # norm is divided out and the query's kept, with no 1/sqrt(d) (the
        # authors' trax code and the published checkpoints: k is RMS-
        # normalised, then divided by sqrt(d)).
        qk32 = ops.cast(sorted_qk, "float32")
        keys_hat = qk32 / ops.sqrt(ops.sum(qk32 * qk32, axis=-1, keepdims=True) + 1e-12)
        queries = qk32
        key_valid = ops.take_along_axis(
            ops.broadcast_to(ops.reshape(valid, (batch, 1, padded)),
                             (batch, self.num_heads, padded)), pos, axis=2)
        out, lse = self.attend(queries, keys_hat, sorted_v, pos, pos, key_valid, training,
                               mask_self=True)

        # Unsort each round, then combine the rounds by their share of the
        # attention mass.
        rounds = (batch, self.num_heads, self.num_hashes, padded)
        out = ops.take_along_axis(ops.reshape(out, rounds + (self.head_dim,)),
                                  ops.expand_dims(undo, -1), axis=3)
        lse = ops.take_along_axis(ops.reshape(lse, rounds), undo, axis=3)
        if self.num_hashes == 1:
            out = ops.cast(out[:, :, 0], "float32")
        else:
            weights = ops.softmax(lse, axis=2)
            out = ops.sum(ops.cast(out, "float32") * ops.expand_dims(weights, -1), axis=2)
        return self.output_dense(merge_heads(ops.cast(out, self.compute_dtype))[:, :length])

    def get_config(self):
        config = super().get_config()
        config.update({"num_hashes": self.num_hashes, "num_buckets": self.num_buckets,
                       "seed": self.seed})
        return config
