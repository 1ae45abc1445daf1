"""BigBird's block-sparse self-attention (Zaheer et al., 2020), ITC form.

The sequence is cut into blocks of `block_size` tokens (nb blocks). Per head:

    query block 0 and nb-1 (global)  -> every key
    query block i, 0 < i < nb-1      -> key blocks 0 and nb-1 (global),
                                        i-1, i, i+1 (sliding window),
                                        `num_random_blocks` random blocks

Random blocks are drawn, without replacement, from the blocks that are
neither global nor in the row's window ({1..nb-2} minus {i-1, i, i+1}).
Every query block attends at most (5 + num_random_blocks) key blocks, so the
work and memory are linear in the sequence length: keys and values are
gathered per query block ([B, N, nb-2, 5+r, b, d]) and no [T, T] tensor is
ever formed (except on request, for inspection, by `attention_pattern` /
`return_attention_scores`).

The random pattern is fixed per layer, as in the original, which plans it
with numpy when the graph is built: here a table of random keys
[num_heads, M, M] (M = blocks of `max_sequence_length`) is drawn once from
`seed` at construction, and for a sequence of nb blocks each query block
takes the `num_random_blocks` allowed key blocks with the smallest keys.
The pattern is therefore a deterministic function of (seed, num_heads,
block_size, max_sequence_length, nb): the same in training, evaluation and
an exported SavedModel, and computed with `keras.ops`, so the sequence
length may be unknown while tracing. Without `max_sequence_length` the
table is drawn for the sequence's own number of blocks, which must then be
known when the layer is traced. (The original samples the last query rows'
random blocks from a slightly wider range that can overlap the window,
which its comments call a bug; this layer always excludes the window.)

Short sequences use full attention, with the original's rule: block-sparse
only when T > (5 + 2 * num_random_blocks) * block_size (the globals, the
window, the random blocks and as many again of spare blocks to draw the
random ones from). A length that is not a multiple of `block_size` is padded
internally with masked keys and the output cut back: no error.

The weights are those of `MultiHeadSelfAttention` (one fused [H, 3H] qkv
kernel and the output projection, same names), so a checkpoint works with
full and block-sparse attention alike. Unlike the original, dropout on the
attention probabilities is applied in the block-sparse path too (the
original drops it there), so both paths train alike.
"""

import math

import keras
import numpy as np
from keras import ops

from kerasbert.layers.attention_bias import MASK_BIAS
from kerasbert.layers.attention import MultiHeadSelfAttention
from kerasbert.layers.attention_bias import padding_mask_to_attention_bias

# Key-block slots of a middle query block i: the two global blocks, the
# window i-1, i, i+1, then the random blocks.
_FIXED_SLOTS = 5


def sparse_threshold(block_size, num_random_blocks):
    """Longest sequence that still uses full attention (the original's
    `(5 + 2 * num_random_blocks) * block_size`)."""
    return (_FIXED_SLOTS + 2 * num_random_blocks) * block_size


@keras.saving.register_keras_serializable(package="kerasbert")
class BlockSparseSelfAttention(MultiHeadSelfAttention):
    """BigBird ITC self-attention on `MultiHeadSelfAttention`'s weights.

    Args:
        num_heads: int.
        block_size: int. Tokens per block (64 in BigBird).
        num_random_blocks: int. Random key blocks per query block (3).
        seed: int. Seed of the random pattern (the backbones pass the layer
            index, so every layer gets its own pattern).
        max_sequence_length: int or None. Longest sequence the layer will
            see; sizes the random-key table so that any length up to it,
            static or not, gets its pattern. None: plan per static length.
        dropout: float. Dropout on the attention probabilities.
        initializer_range: float.

    Call args:
        x: float tensor [B, T, H].
        attention_bias: a key padding bias [B, 1, 1, T] (from
            `padding_mask_to_attention_bias`), or None. Block-sparse
            attention cannot take a general [B, N, T, T] bias.
        return_attention_scores: bool. Also return the [B, N, T, T]
            float32 probabilities (scattered from blocks; O(T^2), for
            inspection and tests only).
        sparse: None (the rule above), True (force the block-sparse path,
            e.g. to compare it with full attention on a short input; needs
            at least 3 blocks) or False (force full attention).

    Returns:
        float tensor [B, T, H] (and the probabilities if asked).

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import BlockSparseSelfAttention
    >>> attention = BlockSparseSelfAttention(num_heads=2, block_size=4, num_random_blocks=1)
    >>> x = np.zeros((1, 32, 8), "float32")                   # [B, T, H], 8 blocks of 4
    >>> tuple(attention(x, sparse=True).shape)                # [B, T, H]
    (1, 32, 8)
    """

    def __init__(
        self,
        num_heads,
        block_size=64,
        num_random_blocks=3,
        seed=0,
        max_sequence_length=None,
        dropout=0.1,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(
            num_heads,
            dropout=dropout,
            initializer_range=initializer_range,
            **kwargs,
        )
        for name, value, low in (
            ("block_size", block_size, 1),
            ("num_random_blocks", num_random_blocks, 0),
        ):
            if not isinstance(value, int) or value < low:
                raise ValueError(
                    f"{name} must be an integer >= {low}, got {value!r}."
                )
        if max_sequence_length is not None and max_sequence_length < 1:
            raise ValueError(
                f"max_sequence_length must be >= 1, got {max_sequence_length}."
            )
        self.block_size = block_size
        self.num_random_blocks = num_random_blocks
        self.seed = seed
        self.max_sequence_length = max_sequence_length
        self._key_tables = {}

    # --- the pattern -------------------------------------------------------

    def uses_block_sparse(self, sequence_length):
        """Whether a sequence of `sequence_length` tokens takes the sparse path."""
        return sequence_length > sparse_threshold(
            self.block_size, self.num_random_blocks
        )

    def _table_blocks(self, num_blocks=None):
        if self.max_sequence_length is not None:
            table = -(-self.max_sequence_length // self.block_size)
            if isinstance(num_blocks, int) and num_blocks > table:
                raise ValueError(
                    f"A sequence of {num_blocks} blocks is longer than "
                    f"max_sequence_length {self.max_sequence_length} "
                    f"(block_size {self.block_size})."
                )
            return table
        if not isinstance(num_blocks, int):
            raise ValueError(
                "BlockSparseSelfAttention without max_sequence_length needs "
                "a sequence length known when the layer is traced; give "
                "max_sequence_length (the backbones do) or a fixed length."
            )
        return num_blocks

    def _random_keys(self, num_blocks=None):
        """numpy float32 [N, M, M]: the random key of (head, query block,
        key block); drawn once per table size from `seed`."""
        size = self._table_blocks(num_blocks)
        if size not in self._key_tables:
            rng = np.random.default_rng(self.seed)
            self._key_tables[size] = rng.random(
                (self.num_heads, size, size), dtype=np.float32
            )
        return self._key_tables[size]

    def random_blocks(self, num_blocks):
        """The planned random key blocks (numpy, the same choice as the
        computation makes with ops).

        Args:
            num_blocks: int, nb >= 3.

        Returns:
            (blocks, valid): int32 [N, nb-2, r] key-block ids of query
            blocks 1..nb-2, and bool [N, nb-2, r], False where a row has
            fewer allowed blocks than r (that slot is then masked).
        """
        keys = self._random_keys(num_blocks)[:, 1 : num_blocks - 1, :num_blocks]
        allowed = _allowed_random(np, num_blocks)
        masked = np.where(allowed[None], keys, 2.0)
        order = np.argsort(masked, axis=-1, kind="stable")
        blocks = order[..., : self.num_random_blocks].astype("int32")
        valid = np.take_along_axis(
            np.broadcast_to(allowed, masked.shape), blocks, axis=-1
        )
        return blocks, valid

    def _key_block_slots(self, num_blocks):
        """(ids, valid): int32 [N, nb-2, S] key blocks of query blocks
        1..nb-2 in slot order (globals, window, random) and float32
        [N, nb-2, S], 0 where a slot repeats a global block (rows 1 and
        nb-2) or has no random block to take (S = 5 + r)."""
        nb = num_blocks
        rows = ops.arange(1, nb - 1, dtype="int32")[:, None]  # [nb-2, 1]
        fixed = ops.concatenate(
            [
                ops.zeros_like(rows),
                ops.zeros_like(rows) + (nb - 1),
                rows - 1,
                rows,
                rows + 1,
            ],
            axis=1,
        )
        # The window's outer blocks repeat a global block in rows 1, nb-2.
        fixed_valid = ops.concatenate(
            [
                ops.ones_like(rows),
                ops.ones_like(rows),
                ops.cast(rows > 1, "int32"),
                ops.ones_like(rows),
                ops.cast(rows < nb - 2, "int32"),
            ],
            axis=1,
        )
        num_heads = self.num_heads
        ids = ops.broadcast_to(fixed[None], (num_heads, nb - 2, _FIXED_SLOTS))
        valid = ops.broadcast_to(
            fixed_valid[None], (num_heads, nb - 2, _FIXED_SLOTS)
        )
        if self.num_random_blocks:
            table = ops.convert_to_tensor(self._random_keys(nb))
            keys = ops.slice(table, (0, 1, 0), (num_heads, nb - 2, nb))
            allowed = _allowed_random(ops, nb)
            masked = ops.where(allowed[None], keys, ops.cast(2.0, keys.dtype))
            # The r smallest keys among the allowed blocks: sampling
            # without replacement, fixed by the table.
            _, random_ids = ops.top_k(-masked, k=self.num_random_blocks)
            random_ids = ops.cast(random_ids, "int32")
            random_valid = ops.take_along_axis(
                ops.cast(ops.broadcast_to(allowed[None], ops.shape(masked)), "int32"),
                random_ids,
                axis=-1,
            )
            ids = ops.concatenate([ids, random_ids], axis=-1)
            valid = ops.concatenate([valid, random_valid], axis=-1)
        return ids, ops.cast(valid, "float32")

    def attention_pattern(self, padding_mask, sparse=None):
        """Which key each query attends: int32 [B, N, T, T], 1 where the
        probability is non-zero, from the real computation (probabilities
        of a zero input, where every attended key gets the same score).

        Args:
            padding_mask: int [B, T], 1 for real tokens.
            sparse: as in `call`.
        """
        if not self.built:
            raise ValueError("Build the layer (call it once) first.")
        mask = ops.convert_to_tensor(padding_mask)
        shape = ops.shape(mask)
        x = ops.zeros((shape[0], shape[1], self.hidden_dim), self.compute_dtype)
        _, probs = self(
            x,
            padding_mask_to_attention_bias(mask),
            return_attention_scores=True,
            sparse=sparse,
        )
        return ops.cast(probs > 0, "int32")

    # --- the computation ---------------------------------------------------

    def call(
        self,
        x,
        attention_bias=None,
        training=None,
        return_attention_scores=False,
        sparse=None,
    ):
        full = lambda: super(BlockSparseSelfAttention, self).call(  # noqa: E731
            x,
            attention_bias,
            training=training,
            return_attention_scores=return_attention_scores,
        )
        block_sparse = lambda: self._block_sparse_call(  # noqa: E731
            x, attention_bias, training, return_attention_scores
        )
        if sparse is False:
            return full()
        length = ops.shape(x)[1]
        if sparse:
            if isinstance(length, int) and length < 2 * self.block_size + 1:
                raise ValueError(
                    f"sparse=True needs at least 3 blocks of {self.block_size} "
                    f"tokens, got a sequence of {length}."
                )
            return block_sparse()
        threshold = sparse_threshold(self.block_size, self.num_random_blocks)
        if isinstance(length, int):
            return block_sparse() if length > threshold else full()
        # Length unknown while tracing: decide when it runs.
        return ops.cond(length > threshold, block_sparse, full)

    def _key_bias(self, attention_bias, batch, length):
        """[B, 1, 1, T] padding bias (or None) -> float32 [B, T]."""
        if attention_bias is None:
            return ops.zeros((batch, length), "float32")
        shape = tuple(attention_bias.shape)
        if len(shape) != 4 or shape[1] not in (1, None) or shape[2] not in (1, None):
            raise ValueError(
                "Block-sparse attention takes a key padding bias of shape "
                f"[B, 1, 1, T] (padding_mask_to_attention_bias), got {shape}; "
                "causal or per-query biases need full attention."
            )
        return ops.cast(attention_bias[:, 0, 0, :], "float32")

    def _block_sparse_call(self, x, attention_bias, training, return_scores):
        shape = ops.shape(x)
        batch, length = shape[0], shape[1]
        b, n, d = self.block_size, self.num_heads, self.head_dim
        key_bias = self._key_bias(attention_bias, batch, length)
        query, key, value, key_bias, padded = self._heads_first(x, key_bias, batch, length)
        nb = padded // b
        q_blocks = ops.reshape(query, (batch, n, nb, b, d))

        # Global query blocks 0 and nb-1: every key. [B, N, 2, b, T]
        q_global = ops.concatenate([q_blocks[:, :, :1], q_blocks[:, :, -1:]], 2)
        global_scores = ops.cast(
            ops.einsum("bngid,bnkd->bngik", q_global, key), "float32"
        ) + key_bias[:, None, None, None, :]
        global_probs = ops.softmax(global_scores, axis=-1)
        mid_probs, v_mid, ids = self._middle_blocks(q_blocks, key, value, key_bias, batch, nb)

        global_context = ops.einsum(
            "bngik,bnkd->bngid", self.drop_probabilities(global_probs, training), value)
        mid_context = ops.einsum(
            "bnqij,bnqjd->bnqid", self.drop_probabilities(mid_probs, training), v_mid)
        context = ops.concatenate(
            [global_context[:, :, :1], mid_context, global_context[:, :, 1:]], 2
        )
        context = ops.transpose(ops.reshape(context, (batch, n, padded, d)), (0, 2, 1, 3))
        context = ops.reshape(context, (batch, padded, self.hidden_dim))[:, :length]
        output = self.output_dense(context)
        if not return_scores:
            return output
        probs = self._dense_probabilities(global_probs, mid_probs, ids, nb)
        return output, probs[:, :, :length, :length]

    def _heads_first(self, x, key_bias, batch, length):
        """The projections of x [B, T, H], heads first, with T padded to
        whole blocks.

        Returns:
            (query, key, value) [B, N, T', d] (the query scaled), the key
            bias float32 [B, T'] and T' (masked keys fill the last block;
            the caller cuts their rows off).
        """
        b, n, d = self.block_size, self.num_heads, self.head_dim
        # Same projection and scaling as MultiHeadSelfAttention (same
        # weights), then heads first.
        query, key, value = ops.split(self.qkv_dense(x), 3, axis=-1)
        query = query * ops.cast(1.0 / math.sqrt(d), query.dtype)
        pad = (-length) % b
        if not isinstance(pad, int) or pad:
            query, key, value = (
                ops.pad(t, [[0, 0], [0, pad], [0, 0]]) for t in (query, key, value)
            )
            key_bias = ops.pad(
                key_bias, [[0, 0], [0, pad]], constant_values=MASK_BIAS
            )
        padded = length + pad
        query, key, value = (
            ops.transpose(ops.reshape(t, (batch, padded, n, d)), (0, 2, 1, 3))
            for t in (query, key, value)
        )
        return query, key, value, key_bias, padded

    def _middle_blocks(self, q_blocks, key, value, key_bias, batch, nb):
        """The middle query blocks (1..nb-2) over their 5 + r key blocks,
        gathered per head.

        Args:
            q_blocks: [B, N, nb, b, d]; key, value: [B, N, T', d];
            key_bias: float32 [B, T'].

        Returns:
            (probabilities float32 [B, N, nb-2, b, S*b], the gathered values
            [B, N, nb-2, S*b, d], the key-block ids int32 [N, nb-2, S]).
        """
        b, n, d = self.block_size, self.num_heads, self.head_dim
        ids, valid = self._key_block_slots(nb)  # [N, nb-2, S]
        slots = ops.shape(ids)[-1]
        flat = ops.reshape(
            ids + ops.arange(n, dtype="int32")[:, None, None] * nb, (-1,)
        )

        def gather(t, width):  # [B, N*nb, b, width] -> [B, N, nb-2, S*b, width]
            taken = ops.take(t, flat, axis=1)
            return ops.reshape(taken, (batch, n, nb - 2, slots * b, width))

        k_mid = gather(ops.reshape(key, (batch, n * nb, b, d)), d)
        v_mid = gather(ops.reshape(value, (batch, n * nb, b, d)), d)
        mid_bias = ops.take(ops.reshape(key_bias, (batch, nb, b)), ops.reshape(ids, (-1,)), axis=1)
        mid_bias = ops.reshape(mid_bias, (batch, n, nb - 2, 1, slots * b))
        slot_bias = ops.repeat((1.0 - valid) * MASK_BIAS, b, axis=-1)
        # A minimum, not a sum: a padded key in an unused slot stays at
        # MASK_BIAS instead of reaching -6e4.
        mid_bias = ops.minimum(mid_bias, slot_bias[None, :, :, None, :])
        mid_scores = ops.cast(
            ops.einsum("bnqid,bnqjd->bnqij", q_blocks[:, :, 1:-1], k_mid),
            "float32",
        ) + mid_bias
        return ops.softmax(mid_scores, axis=-1), v_mid, ids

    def _dense_probabilities(self, global_probs, mid_probs, ids, nb):
        """Scatters blocked probabilities to float32 [B, N, T, T]."""
        b = self.block_size
        shape = ops.shape(mid_probs)
        batch, n, slots = shape[0], shape[1], ops.shape(ids)[-1]
        one_hot = ops.one_hot(ids, nb, dtype="float32")  # [N, nb-2, S, nb]
        mid = ops.reshape(mid_probs, (batch, n, nb - 2, b, slots, b))
        mid = ops.einsum("bnqisk,nqsj->bnqijk", mid, one_hot)
        mid = ops.reshape(mid, (batch, n, (nb - 2) * b, nb * b))
        return ops.concatenate(
            [global_probs[:, :, 0], mid, global_probs[:, :, 1]], axis=2
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "block_size": self.block_size,
                "num_random_blocks": self.num_random_blocks,
                "seed": self.seed,
                "max_sequence_length": self.max_sequence_length,
            }
        )
        return config


def _allowed_random(xp, num_blocks):
    """bool [nb-2, nb]: key blocks a middle query block (rows 1..nb-2) may
    take at random: not global (0, nb-1) and outside its window. `xp` is
    numpy or keras.ops."""
    rows = xp.arange(1, num_blocks - 1)[:, None]
    cols = xp.arange(num_blocks)[None, :]
    inner = (cols >= 1) & (cols <= num_blocks - 2)
    return inner & (xp.abs(cols - rows) > 1)
