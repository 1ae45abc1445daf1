import os
import sys

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

sys.path.insert(0, os.path.dirname(__file__))
from peer_fixtures import hub_inputs  # noqa: E402
from peer_fixtures import ours_inputs  # noqa: E402
from peer_fixtures import padded_batch  # noqa: E402
from peer_fixtures import randomize  # noqa: E402
from slow_marks import slow_covered_by  # noqa: E402

SIZE = dict(vocabulary_size=60, num_layers=2, num_heads=2, hidden_dim=16,
            intermediate_dim=32, max_sequence_length=12)


def ours_out(model, ids, mask):
    return model(ours_inputs(ids, mask))["sequence_output"]


class TestDistilBertKerasHubConversion(TestCase):
    def test_parity_on_padded_rows(self):
        peer = randomize(keras_hub.models.DistilBertBackbone(**SIZE))
        ours = distil_bert_from_keras_hub(peer)
        ids, mask, _ = padded_batch(60)
        expected = peer(hub_inputs(ids, mask))
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
        ids, mask, _ = padded_batch(60, seed=2)
        np.testing.assert_allclose(
            np.asarray(peer(hub_inputs(ids, mask))),
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

    # distilbert_base's size (66M weights, 128 tokens); the default suite checks parity on a
    # tiny model and distilbert_base's parameter count.
    @slow_covered_by(
        "tests/convert/test_distil_bert_convert.py::TestDistilBertKerasHubConversion::test_parity_on_padded_rows",
        "tests/models/distil_bert/test_distil_bert_backbone.py::TestDistilBertPresets::test_distilbert_base_parameter_count")
    def test_parity_at_distilbert_base_size(self):
        peer = keras_hub.models.DistilBertBackbone(
            vocabulary_size=30522, num_layers=6, num_heads=12, hidden_dim=768,
            intermediate_dim=3072, max_sequence_length=512)
        ours = distil_bert_from_keras_hub(peer)
        assert ours.count_params() == peer.count_params() == 66362880
        ids, mask, _ = padded_batch(30522, length=128)
        np.testing.assert_allclose(np.asarray(ours_out(ours, ids, mask)),
                                   np.asarray(peer(hub_inputs(ids, mask))),
                                   atol=1e-4)
