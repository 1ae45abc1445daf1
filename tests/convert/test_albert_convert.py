"""ALBERT parity: keras-hub AlbertBackbone and Model Garden AlbertEncoder,
same (random) weights, padded batch, float32 outputs within 1e-5."""

import keras_hub
import numpy as np
import pytest
from official.nlp.modeling import networks

from kerasbert.convert.albert_weights import albert_from_keras_hub
from kerasbert.convert.albert_weights import albert_from_tf_models
from kerasbert.convert.albert_weights import albert_to_keras_hub
from kerasbert.convert.albert_weights import get_albert_weights
from kerasbert.models import AlbertBackbone

TINY = dict(
    vocabulary_size=60, num_layers=4, num_heads=2, embedding_dim=8,
    hidden_dim=16, intermediate_dim=32, max_sequence_length=12,
)


def randomize(weights, seed=0):
    """Random values everywhere (LayerNorm and biases too), so a mapping
    mistake cannot hide behind ones and zeros."""
    rng = np.random.default_rng(seed)
    for w in weights:
        w.assign(rng.normal(0, 0.2, w.shape).astype("float32"))


def batch(vocab, batch_size=3, length=10, seed=1):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, (batch_size, length), dtype="int32")
    mask = np.ones((batch_size, length), "int32")
    for i in range(1, batch_size):
        mask[i, length - 3 * i:] = 0  # Rows padded by 3, 6, ... tokens.
    types = (np.arange(length) >= length // 2).astype("int32")[None].repeat(batch_size, 0)
    return ids * mask, mask, types * mask


def ours_inputs(ids, mask, types):
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def hub_inputs(ids, mask, types):
    return {"token_ids": ids, "padding_mask": mask, "segment_ids": types}


def assert_close(expected, got, keys=("sequence_output", "pooled_output")):
    for key in keys:
        np.testing.assert_allclose(
            np.asarray(got[key]), np.asarray(expected[key]), atol=1e-5, err_msg=key
        )


def keras_hub_parity(config, seed=0):
    peer = keras_hub.models.AlbertBackbone(**config)
    randomize(peer.weights, seed)
    ours = albert_from_keras_hub(peer)
    data = batch(config["vocabulary_size"])
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
        randomize(ours.weights, seed=5)
        peer = albert_to_keras_hub(ours)
        data = batch(60)
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

    @pytest.mark.slow
    def test_parity_at_albert_base_size(self):
        config = dict(
            vocabulary_size=30000, num_layers=12, num_heads=12, embedding_dim=128,
            hidden_dim=768, intermediate_dim=3072, max_sequence_length=512,
        )
        peer = keras_hub.models.AlbertBackbone(**config)
        ours = albert_from_keras_hub(peer)
        assert ours.count_params() == peer.count_params() == 11_683_584
        data = batch(30000, length=64)
        assert_close(peer(hub_inputs(*data)), ours(ours_inputs(*data)))


def erf_gelu(x):
    import tf_keras

    return tf_keras.activations.gelu(x, approximate=False)


def tf_models_encoder(**overrides):
    config = dict(
        vocab_size=60, embedding_width=8, hidden_size=16, num_layers=3,
        num_attention_heads=2, max_sequence_length=12, type_vocab_size=2,
        intermediate_size=32, dict_outputs=True,
    )
    encoder = networks.AlbertEncoder(**{**config, **overrides})
    rng = np.random.default_rng(7)
    for v in encoder.weights:
        value = rng.normal(0, 0.2, v.shape)
        if "gamma" in v.name:
            value += 1.0
        v.assign(value.astype("float32"))
    return encoder


class TestTfModels:
    def test_parity(self):
        encoder = tf_models_encoder()
        ours = albert_from_tf_models(encoder)
        data = ours_inputs(*batch(60))
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
        data = ours_inputs(*batch(60))
        assert_close(encoder(data), ours(data))

    def test_rejects_other_encoders(self):
        with pytest.raises(TypeError, match="AlbertEncoder"):
            albert_from_tf_models(AlbertBackbone(**TINY))
