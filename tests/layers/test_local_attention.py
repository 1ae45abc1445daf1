"""The Reformer's local attention equals full attention restricted to the
chunk window (written out densely here), with causal and padding masks."""

import os
import sys

import numpy as np

from kerasbert.layers.local_attention import LocalSelfAttention
from kerasbert.testing import TestCase

sys.path.insert(0, os.path.dirname(__file__))
from reference_attention import dense_attention  # noqa: E402

HIDDEN, HEADS = 16, 2


def banded_attention(layer, x, mask, chunk, before, after, causal):
    """Dense reference: query t sees key s when s's chunk is within
    [chunk(t) - before, chunk(t) + after] (no wrapping), s is real, and
    s <= t under causal."""
    b, t, _ = x.shape
    d = HIDDEN // HEADS
    q, k, v = ((x @ np.asarray(dense.kernel)).reshape(b, t, HEADS, d).transpose(0, 2, 1, 3)
               for dense in (layer.query_dense, layer.key_dense, layer.value_dense))
    scores = np.einsum("bntd,bnsd->bnts", q / np.sqrt(d), k)
    ct = np.arange(t)[:, None] // chunk
    cs = np.arange(t)[None, :] // chunk
    allowed = (cs >= ct - before) & (cs <= ct + after)
    if causal:
        allowed &= np.arange(t)[None, :] <= np.arange(t)[:, None]
    allowed = allowed[None, None] & mask[:, None, None, :].astype(bool)
    return dense_attention(scores, allowed, v, layer.output_dense)


class TestLocalSelfAttention(TestCase):
    def test_layer_basics(self):
        x = np.random.RandomState(0).randn(2, 20, HIDDEN).astype("float32")
        mask = np.ones((2, 20), "int32")
        mask[1, 13:] = 0
        self.run_layer_test(LocalSelfAttention, dict(num_heads=HEADS, chunk_length=8),
                            (x, mask), expected_output_shape=(2, 20, HIDDEN),
                            expected_num_trainable_weights=4)

    def test_equals_banded_full_attention(self):
        rng = np.random.RandomState(1)
        x = rng.randn(2, 30, HIDDEN).astype("float32")  # not a multiple of the chunk
        mask = np.ones((2, 30), "int32")
        mask[1, 19:] = 0
        for before, after, causal in ((1, 0, True), (1, 1, False), (0, 0, False), (2, 1, True)):
            layer = LocalSelfAttention(HEADS, chunk_length=4, num_chunks_before=before,
                                       num_chunks_after=after, causal=causal)
            out = np.asarray(layer(x, mask))
            ref = banded_attention(layer, x, mask, 4, before, after, causal)
            real = mask.astype(bool)
            np.testing.assert_allclose(out[real], ref[real], atol=1e-5, rtol=1e-5,
                                       err_msg=str((before, after, causal)))
