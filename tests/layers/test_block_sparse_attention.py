"""BigBird block-sparse attention: exact where it must be, the intended ITC
graph elsewhere, padding respected, same weights as full attention."""

import numpy as np
import pytest

from kerasbert.layers import BlockSparseSelfAttention
from kerasbert.layers import MultiHeadSelfAttention
from kerasbert.layers import TransformerEncoderBlock
from kerasbert.layers import padding_mask_to_attention_bias
from kerasbert.layers.block_sparse_attention import sparse_threshold
from kerasbert.testing import TestCase

# Blocks of 2 tokens, 1 random block: sparse above (5 + 2) * 2 = 14 tokens.
KWARGS = dict(num_heads=2, block_size=2, num_random_blocks=1, seed=7,
              max_sequence_length=32, dropout=0.0)
HIDDEN = 8
RNG = np.random.RandomState(0)


def _inputs(length, real=None, batch=2):
    x = RNG.randn(batch, length, HIDDEN).astype("float32")
    mask = np.ones((batch, length), "int32")
    if real is not None:
        mask[-1, real:] = 0
    return x, mask, padding_mask_to_attention_bias(mask)


def _pair(**overrides):
    """A block-sparse layer and a full-attention layer with its weights."""
    sparse = BlockSparseSelfAttention(**{**KWARGS, **overrides})
    full = MultiHeadSelfAttention(2, dropout=0.0)
    x, _, bias = _inputs(20)
    sparse(x, bias)
    full(x, bias)
    full.set_weights(sparse.get_weights())
    return sparse, full


def _expected_pattern(num_blocks, block_size, random_blocks, mask):
    """[N, T, T] 0/1 built from the ITC rules, not from the layer's code."""
    heads = random_blocks.shape[0]
    length = num_blocks * block_size
    blocks = np.zeros((heads, num_blocks, num_blocks), "int32")
    last = num_blocks - 1
    for h in range(heads):
        for q in range(num_blocks):
            for k in range(num_blocks):
                globals_ = q in (0, last) or k in (0, last)
                window = abs(q - k) <= 1
                randoms = 0 < q < last and k in random_blocks[h, q - 1]
                blocks[h, q, k] = globals_ or window or randoms
    dense = np.kron(blocks, np.ones((block_size, block_size), "int32"))
    return dense[:, :length, :length] * mask[None, None, :]


class TestBlockSparseSelfAttention(TestCase):
    def test_layer_basics_on_the_sparse_path(self):
        # 16 tokens > 14: the sparse path (config, gradients, half precision).
        x, _, bias = _inputs(16, real=11)
        layer = self.run_layer_test(
            BlockSparseSelfAttention,
            {**KWARGS, "dropout": 0.1},
            (x, bias),
            expected_output_shape=(2, 16, HIDDEN),
            expected_num_trainable_weights=4,
        )
        assert layer.uses_block_sparse(16) and not layer.uses_block_sparse(14)
        assert sparse_threshold(64, 3) == 704  # BigBird-base: 11 blocks of 64

    def test_full_coverage_equals_full_attention(self):
        # 20 tokens = 10 blocks; rows 1 and 8 have 6 allowed random blocks,
        # the others 5: with 6 random blocks every row sees every block.
        sparse, full = _pair(num_random_blocks=6)
        x, mask, bias = _inputs(20, real=13)
        pattern = np.asarray(sparse.attention_pattern(mask, sparse=True))
        assert (pattern[0] == 1).all() and (pattern[1, :, :, 13:] == 0).all()
        out, probs = sparse(x, bias, return_attention_scores=True, sparse=True)
        ref, ref_probs = full(x, bias, return_attention_scores=True)
        self.assertAllClose(ref, out, atol=1e-5, rtol=1e-5)
        self.assertAllClose(ref_probs, probs, atol=1e-6)

    def test_attention_graph_is_the_itc_pattern(self):
        layer, _ = _pair()
        length, block = 20, 2
        num_blocks = length // block
        x, mask, bias = _inputs(length, real=13)
        blocks, valid = layer.random_blocks(num_blocks)
        assert blocks.shape == (2, num_blocks - 2, 1) and valid.all()
        for h in range(2):
            for row, chosen in enumerate(blocks[h], start=1):
                for k in chosen:  # Neither global nor in the window.
                    assert 0 < k < num_blocks - 1 and abs(k - row) > 1
        # Heads draw their own blocks; the pattern is fixed by the seed.
        assert not np.array_equal(blocks[0], blocks[1])
        again = BlockSparseSelfAttention(**KWARGS).random_blocks(num_blocks)[0]
        np.testing.assert_array_equal(again, blocks)
        other = BlockSparseSelfAttention(**{**KWARGS, "seed": 8})
        assert not np.array_equal(other.random_blocks(num_blocks)[0], blocks)

        actual = np.asarray(layer.attention_pattern(mask))
        for row in range(2):
            expected = _expected_pattern(num_blocks, block, blocks, mask[row])
            np.testing.assert_array_equal(actual[row], expected)
        # Sparse indeed: a middle row sees 6 of the 10 blocks.
        assert actual[0, 0, 10].sum() == 6 * block

    def test_padded_keys_get_zero_probability(self):
        layer, _ = _pair()
        x, mask, bias = _inputs(20, real=13)
        _, probs = layer(x, bias, return_attention_scores=True)
        probs = np.asarray(probs)
        assert (probs[1, :, :, 13:] == 0).all()
        np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
        # What sits in the padding does not change the real tokens.
        changed = x.copy()
        changed[1, 13:] = 100.0
        a, b = layer(x, bias), layer(changed, bias)
        self.assertAllClose(np.asarray(a)[1, :13], np.asarray(b)[1, :13], atol=1e-5)

    def test_short_sequences_fall_back_to_exact_full_attention(self):
        layer, full = _pair()
        x, mask, bias = _inputs(14, real=9)  # = the threshold: full
        self.assertAllClose(full(x, bias), layer(x, bias), atol=0, rtol=0)
        assert np.asarray(layer.attention_pattern(mask))[0].all()
        x, mask, bias = _inputs(15, real=9)  # one more token: sparse
        assert not np.asarray(layer.attention_pattern(mask))[0].all()

    def test_length_not_a_multiple_of_the_block_is_padded_internally(self):
        layer, _ = _pair()
        x, mask, bias = _inputs(19)
        out = np.asarray(layer(x, bias))
        padded_x = np.concatenate([x, np.zeros((2, 1, HIDDEN), "float32")], 1)
        padded_mask = np.concatenate([mask, np.zeros((2, 1), "int32")], 1)
        ref = np.asarray(layer(padded_x, padding_mask_to_attention_bias(padded_mask)))
        assert out.shape == (2, 19, HIDDEN)
        np.testing.assert_allclose(out, ref[:, :19], atol=1e-6)

    def test_unknown_length_while_tracing_gives_the_same_outputs(self):
        import tensorflow as tf

        layer, _ = _pair()
        spec = [tf.TensorSpec([None, None, HIDDEN]), tf.TensorSpec([None, None], tf.int32)]
        traced = tf.function(
            lambda x, m: layer(x, padding_mask_to_attention_bias(m)), input_signature=spec)
        for length in (10, 20, 23):  # full, sparse, sparse + internal padding
            x, mask, bias = _inputs(length, real=7)
            self.assertAllClose(layer(x, bias), traced(x, mask), atol=1e-6)

    def test_bad_arguments_are_clear_errors(self):
        with pytest.raises(ValueError, match="block_size must be an integer >= 1"):
            BlockSparseSelfAttention(2, block_size=0)
        with pytest.raises(ValueError, match="num_random_blocks"):
            BlockSparseSelfAttention(2, num_random_blocks=-1)
        layer, _ = _pair()
        x, mask, _ = _inputs(20)
        with pytest.raises(ValueError, match=r"key padding bias of shape \[B, 1, 1, T\]"):
            layer(x, np.zeros((2, 1, 20, 20), "float32"))
        with pytest.raises(ValueError, match="longer than max_sequence_length 32"):
            layer(_inputs(40)[0])
        with pytest.raises(ValueError, match="sparse=True needs at least 3 blocks"):
            layer(_inputs(4)[0], sparse=True)
        with pytest.raises(ValueError, match='attention must be "full" or "bigbird"'):
            TransformerEncoderBlock(2, 16, attention="sparse")


class TestEncoderBlockOption(TestCase):
    def test_bigbird_block_shares_weights_and_config_round_trips(self):
        kwargs = dict(num_heads=2, intermediate_dim=16, dropout=0.0)
        sparse_kwargs = dict(attention="bigbird", block_size=2, num_random_blocks=1,
                             attention_seed=3, max_sequence_length=32)
        block = TransformerEncoderBlock(**kwargs, **sparse_kwargs)
        plain = TransformerEncoderBlock(**kwargs)
        x, mask, bias = _inputs(20, real=13)
        block(x, bias)
        plain(x, bias)
        assert isinstance(block.attention, BlockSparseSelfAttention)
        assert [w.path.split("/", 1)[1] for w in block.weights] == [
            w.path.split("/", 1)[1] for w in plain.weights]
        plain.set_weights(block.get_weights())
        # Short input: the same function; long input: a different one.
        self.assertAllClose(plain(x[:, :14], bias[..., :14]),
                            block(x[:, :14], bias[..., :14]), atol=1e-6)
        assert np.abs(np.asarray(plain(x, bias)) - np.asarray(block(x, bias))).max() > 1e-4
        config = block.get_config()
        assert {k: config[k] for k in sparse_kwargs} == sparse_kwargs
        assert "attention" not in plain.get_config()
        self.run_serialization_test(block)
        assert block.attention.seed == 3
