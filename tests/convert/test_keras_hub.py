import keras_hub
import numpy as np
import pytest

from kerasbert.convert import from_keras_hub
from kerasbert.convert import to_keras_hub
from kerasbert.models import BertBackbone
from kerasbert.testing import TestCase


def randomize(model, seed=0):
    """Random values everywhere (LayerNorm and biases too), so a mapping
    mistake cannot hide behind ones and zeros."""
    rng = np.random.default_rng(seed)
    for w in model.weights:
        w.assign(rng.normal(0, 0.2, w.shape).astype(w.dtype))
    return model


def batch(vocab, batch_size=3, length=10, seed=1):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, (batch_size, length), dtype="int32")
    mask = np.ones((batch_size, length), "int32")
    for i in range(1, batch_size):
        mask[i, length - 3 * i :] = 0  # Rows padded by 3, 6, ... tokens.
    types = (np.arange(length) >= length // 2).astype("int32")[None].repeat(batch_size, 0)
    return ids, mask, types


def check_parity(peer, seq_len=10, atol=1e-5):
    ours = from_keras_hub(peer)
    ids, mask, types = batch(peer.vocabulary_size, length=seq_len)
    expected = peer({"token_ids": ids, "padding_mask": mask, "segment_ids": types})
    got = ours({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types})
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(
            np.asarray(got[key]), np.asarray(expected[key]), atol=atol, err_msg=key
        )
    return ours


class TestKerasHubConversion(TestCase):
    def test_parity_on_padded_rows(self):
        peer = randomize(keras_hub.models.BertBackbone(
            vocabulary_size=60, num_layers=2, num_heads=2, hidden_dim=16,
            intermediate_dim=32, max_sequence_length=12,
        ))
        ours = check_parity(peer)
        assert ours.activation == "gelu_approximate"
        assert ours.count_params() == peer.count_params()

    def test_round_trip_back_to_keras_hub(self):
        ours = BertBackbone(
            vocabulary_size=60, num_layers=2, num_heads=2, hidden_dim=16,
            intermediate_dim=32, max_sequence_length=12,
            activation="gelu_approximate",
        )
        randomize(ours, seed=5)
        peer = to_keras_hub(ours)
        ids, mask, types = batch(60)
        self.assertAllClose(
            ours({"input_word_ids": ids, "input_mask": mask, "input_type_ids": types})["pooled_output"],
            peer({"token_ids": ids, "padding_mask": mask, "segment_ids": types})["pooled_output"],
            atol=1e-5,
        )

    def test_refuses_what_cannot_convert_exactly(self):
        erf = BertBackbone(vocabulary_size=60, num_layers=1, num_heads=2,
                           hidden_dim=16, intermediate_dim=32)
        with pytest.raises(ValueError, match="tanh-approximate GELU"):
            to_keras_hub(erf)
        with pytest.raises(TypeError, match="got BertBackbone"):
            from_keras_hub(erf)  # ours, not keras-hub's

    @pytest.mark.slow
    def test_parity_at_bert_base_size(self):
        peer = keras_hub.models.BertBackbone(
            vocabulary_size=30522, num_layers=12, num_heads=12, hidden_dim=768,
            intermediate_dim=3072, max_sequence_length=512,
        )
        ours = check_parity(peer, seq_len=128, atol=1e-4)
        assert ours.count_params() == 109482240


def test_from_keras_hub_dispatches_on_the_family():
    """One entry point for every family; the result is ours of that family."""
    from kerasbert import convert, models

    small = dict(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8,
                 intermediate_dim=16, max_sequence_length=16)
    peers = {
        models.BertBackbone: keras_hub.models.BertBackbone(**small),
        models.AlbertBackbone: keras_hub.models.AlbertBackbone(embedding_dim=4, **small),
        models.RobertaBackbone: keras_hub.models.RobertaBackbone(**small),
        models.DistilBertBackbone: keras_hub.models.DistilBertBackbone(**small),
    }
    for ours_cls, peer in peers.items():
        ours = convert.from_keras_hub(peer)
        assert type(ours) is ours_cls
        assert type(convert.to_keras_hub(ours)) is type(peer)
    with pytest.raises(TypeError, match="DistilBertBackbone"):
        convert.from_keras_hub(keras_hub.layers.PositionEmbedding(4))
