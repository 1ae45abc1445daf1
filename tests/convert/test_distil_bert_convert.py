import keras_hub
import numpy as np
import pytest

from kerasbert.convert import from_keras_hub
from kerasbert.convert import to_keras_hub
from kerasbert.convert.distil_bert_weights import distil_bert_from_keras_hub
from kerasbert.convert.distil_bert_weights import distil_bert_to_keras_hub
from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.bert_weights import set_bert_weights
from kerasbert.models.distil_bert import DistilBertBackbone
from kerasbert.testing import TestCase

SIZE = dict(vocabulary_size=60, num_layers=2, num_heads=2, hidden_dim=16,
            intermediate_dim=32, max_sequence_length=12)


def randomize(model, seed=0):
    """Random values everywhere (LayerNorm and biases too), so a mapping
    mistake cannot hide behind ones and zeros."""
    rng = np.random.default_rng(seed)
    for w in model.weights:
        w.assign(rng.normal(0, 0.2, w.shape).astype(w.dtype))
    return model


def padded_batch(vocab, batch_size=3, length=10, seed=1):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, (batch_size, length), dtype="int32")
    mask = np.ones((batch_size, length), "int32")
    for i in range(1, batch_size):
        mask[i, length - 3 * i:] = 0  # Rows padded by 3, 6, ... tokens.
    return ids, mask


def ours_out(model, ids, mask):
    return model({"input_word_ids": ids, "input_mask": mask,
                  "input_type_ids": np.zeros_like(ids)})["sequence_output"]


class TestDistilBertKerasHubConversion(TestCase):
    def test_parity_on_padded_rows(self):
        peer = randomize(keras_hub.models.DistilBertBackbone(**SIZE))
        ours = distil_bert_from_keras_hub(peer)
        ids, mask = padded_batch(60)
        expected = peer({"token_ids": ids, "padding_mask": mask})
        np.testing.assert_allclose(np.asarray(ours_out(ours, ids, mask)),
                                   np.asarray(expected), atol=1e-5)
        assert ours.count_params() == peer.count_params()
        assert ours.get_config()["num_layers"] == 2
        # The family-dispatching entry points pick DistilBERT's mapping.
        via_dispatch = from_keras_hub(peer)
        assert isinstance(via_dispatch, DistilBertBackbone)
        np.testing.assert_array_equal(np.asarray(ours_out(via_dispatch, ids, mask)),
                                      np.asarray(ours_out(ours, ids, mask)))
        assert type(to_keras_hub(ours)) is keras_hub.models.DistilBertBackbone

    def test_round_trip_back_to_keras_hub(self):
        ours = randomize(DistilBertBackbone(**SIZE), seed=5)
        peer = distil_bert_to_keras_hub(ours)
        ids, mask = padded_batch(60, seed=2)
        np.testing.assert_allclose(
            np.asarray(peer({"token_ids": ids, "padding_mask": mask})),
            np.asarray(ours_out(ours, ids, mask)), atol=1e-5)
        again = distil_bert_from_keras_hub(peer)
        for a, b in zip(ours.get_weights(), again.get_weights()):
            np.testing.assert_array_equal(a, b)

    def test_canonical_dict_round_trip_and_errors(self):
        ours = randomize(DistilBertBackbone(**SIZE), seed=3)
        weights = get_bert_weights(ours)
        assert weights["type_embeddings"] is None and "pooler_kernel" not in weights
        other = set_bert_weights(DistilBertBackbone(**SIZE), weights)
        for a, b in zip(ours.get_weights(), other.get_weights()):
            np.testing.assert_array_equal(a, b)
        with pytest.raises(ValueError, match="The source has 2 layers, the model 1"):
            set_bert_weights(DistilBertBackbone(**{**SIZE, "num_layers": 1}), weights)
        with pytest.raises(TypeError, match="keras_hub.models.DistilBertBackbone"):
            distil_bert_from_keras_hub(ours)

    @pytest.mark.slow
    def test_parity_at_distilbert_base_size(self):
        peer = keras_hub.models.DistilBertBackbone(
            vocabulary_size=30522, num_layers=6, num_heads=12, hidden_dim=768,
            intermediate_dim=3072, max_sequence_length=512)
        ours = distil_bert_from_keras_hub(peer)
        assert ours.count_params() == peer.count_params() == 66362880
        ids, mask = padded_batch(30522, length=128)
        np.testing.assert_allclose(np.asarray(ours_out(ours, ids, mask)),
                                   np.asarray(peer({"token_ids": ids, "padding_mask": mask})),
                                   atol=1e-4)
