"""ALBERT parity: keras-hub AlbertBackbone and Model Garden AlbertEncoder,
same (random) weights, padded batch, float32 outputs within 1e-5."""

import os
import sys

import keras_hub
import numpy as np
import pytest
from official.nlp.modeling import networks

from kerasbert.convert.albert_weights import albert_from_keras_hub
from kerasbert.convert.albert_weights import albert_from_tf_models
from kerasbert.convert.albert_weights import albert_to_keras_hub
from kerasbert.convert.albert_weights import get_albert_weights
from kerasbert.models import AlbertBackbone

sys.path.insert(0, os.path.dirname(__file__))
from peer_fixtures import assert_close  # noqa: E402
from peer_fixtures import hub_inputs  # noqa: E402
from peer_fixtures import ours_inputs  # noqa: E402
from peer_fixtures import padded_batch  # noqa: E402
from peer_fixtures import randomize  # noqa: E402
from peer_fixtures import tf_models_encoder as tf_models_peer  # noqa: E402
from slow_marks import slow_covered_by  # noqa: E402

TINY = dict(
    vocabulary_size=60, num_layers=4, num_heads=2, embedding_dim=8,
    hidden_dim=16, intermediate_dim=32, max_sequence_length=12,
)


def keras_hub_parity(config, seed=0):
    peer = keras_hub.models.AlbertBackbone(**config)
    randomize(peer, seed)
    ours = albert_from_keras_hub(peer)
    data = padded_batch(config["vocabulary_size"])
    assert_close(peer(hub_inputs(*data)), ours(ours_inputs(*data)))
    assert ours.count_params() == peer.count_params()
    return ours


class TestKerasHub:
    def test_parity_one_shared_block(self):
        ours = keras_hub_parity(TINY)
        assert ours.activation == "gelu_approximate"
        assert len({id(b) for b in ours.transformer_layers}) == 1

    def test_parity_groups_and_inner_repetitions(self):
        ours = keras_hub_parity({**TINY, "num_groups": 2, "num_inner_repetitions": 2}, seed=3)
        # 2 groups x 2 inner blocks own the weights, shared across the layers.
        assert len({id(b) for b in ours.transformer_layers}) == 4

    def test_round_trip(self):
        ours = AlbertBackbone(**TINY, num_groups=2, num_inner_repetitions=2)
        randomize(ours, seed=5)
        peer = albert_to_keras_hub(ours)
        data = padded_batch(60)
        assert_close(ours(ours_inputs(*data)), peer(hub_inputs(*data)))
        back = albert_from_keras_hub(peer)
        a, b = get_albert_weights(ours), get_albert_weights(back)
        for key in a:
            if key != "groups":
                np.testing.assert_array_equal(a[key], b[key])
        for group_a, group_b in zip(a["groups"], b["groups"]):
            for block_a, block_b in zip(group_a, group_b):
                for key in block_a:
                    np.testing.assert_array_equal(block_a[key], block_b[key])

    def test_refuses_what_cannot_convert_exactly(self):
        erf = AlbertBackbone(**TINY, activation="gelu")
        with pytest.raises(ValueError, match="tanh-approximate GELU"):
            albert_to_keras_hub(erf)
        with pytest.raises(TypeError, match="keras_hub.models.AlbertBackbone"):
            albert_from_keras_hub(erf)
        unfactorised = AlbertBackbone(**{**TINY, "embedding_dim": 16})
        with pytest.raises(ValueError, match="embedding_dim == hidden_dim"):
            albert_to_keras_hub(unfactorised)

    # albert_base's size (11.7M weights, 64 tokens); the default suite checks parity on tiny
    # models of both block layouts and albert_base's parameter count.
    @slow_covered_by(
        "tests/convert/test_albert_convert.py::TestKerasHub::test_parity_one_shared_block",
        "tests/convert/test_albert_convert.py::TestKerasHub::test_parity_groups_and_inner_repetitions",
        "tests/models/albert/test_albert_backbone.py::TestAlbertPresets::test_albert_base_parameter_count")
    def test_parity_at_albert_base_size(self):
        config = dict(
            vocabulary_size=30000, num_layers=12, num_heads=12, embedding_dim=128,
            hidden_dim=768, intermediate_dim=3072, max_sequence_length=512,
        )
        peer = keras_hub.models.AlbertBackbone(**config)
        ours = albert_from_keras_hub(peer)
        assert ours.count_params() == peer.count_params() == 11_683_584
        data = padded_batch(30000, length=64)
        assert_close(peer(hub_inputs(*data)), ours(ours_inputs(*data)))


def erf_gelu(x):
    import tf_keras

    return tf_keras.activations.gelu(x, approximate=False)


def tf_models_encoder(**overrides):
    return tf_models_peer(
        networks.AlbertEncoder, vocab_size=60, embedding_width=8, hidden_size=16,
        num_layers=3, num_attention_heads=2, max_sequence_length=12, type_vocab_size=2,
        intermediate_size=32, dict_outputs=True, **overrides,
    )


class TestTfModels:
    def test_parity(self):
        encoder = tf_models_encoder()
        ours = albert_from_tf_models(encoder)
        data = ours_inputs(*padded_batch(60))
        expected = encoder(data)
        got = ours(data)
        assert_close(expected, got)
        for e, g in zip(expected["encoder_outputs"], got["encoder_outputs"]):
            np.testing.assert_allclose(np.asarray(g), np.asarray(e), atol=1e-5)
        assert ours.count_params() == encoder.count_params()
        assert ours.num_layers == 3 and ours.activation == "gelu_approximate"

    def test_erf_gelu_detected(self):
        encoder = tf_models_encoder(activation=erf_gelu)
        ours = albert_from_tf_models(encoder)
        assert ours.activation == "gelu"
        data = ours_inputs(*padded_batch(60))
        assert_close(encoder(data), ours(data))

    def test_rejects_other_encoders(self):
        with pytest.raises(TypeError, match="AlbertEncoder"):
            albert_from_tf_models(AlbertBackbone(**TINY))
