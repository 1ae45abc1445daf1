import numpy as np
import pytest

from kerasbert.layers import BertEmbeddings
from kerasbert.testing import TestCase

KWARGS = dict(
    vocabulary_size=30, max_sequence_length=12, num_segments=2, hidden_dim=16
)
IDS = np.random.RandomState(0).randint(0, 30, (2, 7)).astype("int32")
SEGMENTS = np.array([[0] * 4 + [1] * 3] * 2, "int32")


class TestBertEmbeddings(TestCase):
    def test_layer_basics(self):
        self.run_layer_test(
            BertEmbeddings,
            KWARGS,
            (IDS, SEGMENTS),
            expected_output_shape=(2, 7, 16),
            # token, position, segment tables + LayerNorm gamma/beta
            expected_num_trainable_weights=5,
        )

    def test_factorized_embedding_projects_to_hidden(self):
        self.run_layer_test(
            BertEmbeddings,
            {**KWARGS, "embedding_dim": 8},
            (IDS, SEGMENTS),
            expected_output_shape=(2, 7, 16),
            expected_num_trainable_weights=7,  # + projection kernel, bias
        )
        layer = BertEmbeddings(**KWARGS, embedding_dim=8)
        layer(IDS, SEGMENTS)
        assert tuple(layer.token_embedding.embeddings.shape) == (30, 8)
        # The LayerNorm normalises the embedding width, before projecting.
        assert tuple(layer.layer_norm.gamma.shape) == (8,)

    def test_sum_then_layer_norm(self):
        layer = BertEmbeddings(**KWARGS, dropout=0.0)
        out = np.asarray(layer(IDS, SEGMENTS))
        tok = layer.token_embedding.embeddings.numpy()[IDS]
        pos = layer.position_embedding.position_embeddings.numpy()[:7]
        seg = layer.segment_embedding.embeddings.numpy()[SEGMENTS]
        summed = tok + pos + seg
        mean = summed.mean(-1, keepdims=True)
        var = summed.var(-1, keepdims=True)
        expected = (summed - mean) / np.sqrt(var + 1e-12)
        np.testing.assert_allclose(out, expected, atol=1e-5)

    def test_missing_segments_is_a_clear_error(self):
        with pytest.raises(ValueError, match="needs `segment_ids`"):
            BertEmbeddings(**KWARGS)(IDS)
