import os
import sys

import keras_hub
import pytest

from kerasbert.convert import from_keras_hub
from kerasbert.convert import to_keras_hub
from kerasbert.convert.keras_hub_layout import FIXED_BY_KERAS_HUB
from kerasbert.models import BertBackbone
from kerasbert.testing import TestCase

sys.path.insert(0, os.path.dirname(__file__))
from peer_fixtures import assert_close  # noqa: E402
from peer_fixtures import hub_inputs  # noqa: E402
from peer_fixtures import ours_inputs  # noqa: E402
from peer_fixtures import padded_batch  # noqa: E402
from peer_fixtures import randomize  # noqa: E402
from slow_marks import slow_covered_by  # noqa: E402


def check_parity(peer, sequence_length=10, atol=1e-5):
    ours = from_keras_hub(peer)
    data = padded_batch(peer.vocabulary_size, length=sequence_length)
    assert_close(peer(hub_inputs(*data)), ours(ours_inputs(*data)), atol=atol)
    return ours


# Each keras-hub class's own arguments where they differ from BERT's.
PEER_ARGUMENTS = {
    "AlbertBackbone": dict(embedding_dim=8, num_groups=1, num_inner_repetitions=1),
    "ElectraBackbone": dict(vocab_size=60, embedding_dim=16),
}


@pytest.mark.parametrize("class_name", sorted(FIXED_BY_KERAS_HUB))
def test_what_keras_hub_fixes_is_what_its_blocks_hold(class_name):
    """`require_exact`'s table against the installed keras-hub's blocks."""
    arguments = dict(vocabulary_size=60, num_layers=1, num_heads=2, hidden_dim=16,
                     intermediate_dim=32, max_sequence_length=12)
    arguments.update(PEER_ARGUMENTS.get(class_name, {}))
    if "vocab_size" in arguments:
        del arguments["vocabulary_size"]
    peer = getattr(keras_hub.models, class_name)(**arguments)
    blocks = [layer for layer in peer._flatten_layers()
              if isinstance(layer, keras_hub.layers.TransformerEncoder)]
    assert blocks
    activation, epsilon = FIXED_BY_KERAS_HUB[class_name]
    for block in blocks:
        # keras-hub's own functions (its gelu_approximate is not Keras's).
        assert block.activation.__name__ == activation
        assert block.layer_norm_epsilon == epsilon


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
        data = padded_batch(60)
        self.assertAllClose(
            ours(ours_inputs(*data))["pooled_output"],
            peer(hub_inputs(*data))["pooled_output"],
            atol=1e-5,
        )

    def test_refuses_what_cannot_convert_exactly(self):
        erf = BertBackbone(vocabulary_size=60, num_layers=1, num_heads=2,
                           hidden_dim=16, intermediate_dim=32)
        with pytest.raises(ValueError, match="tanh-approximate GELU"):
            to_keras_hub(erf)
        # keras-hub's BERT fixes epsilon too: 1e-6 once converted silently,
        # its outputs 2.2 apart.
        other_eps = BertBackbone(vocabulary_size=60, num_layers=1, num_heads=2,
                                 hidden_dim=16, intermediate_dim=32,
                                 activation="gelu_approximate", layer_norm_epsilon=1e-6)
        with pytest.raises(ValueError, match=r"layer_norm_epsilon=1e-12; this backbone uses 1e-06"):
            to_keras_hub(other_eps)
        with pytest.raises(TypeError, match="got BertBackbone"):
            from_keras_hub(erf)  # ours, not keras-hub's

    # bert_base's size (109M weights, 128 tokens); the default suite checks parity on a tiny
    # model and bert_base's parameter count by parts.
    @slow_covered_by(
        "tests/convert/test_keras_hub.py::TestKerasHubConversion::test_parity_on_padded_rows",
        "tests/models/bert/test_bert_backbone.py::TestBertPresets::test_published_parameter_counts_by_parts")
    def test_parity_at_bert_base_size(self):
        peer = keras_hub.models.BertBackbone(
            vocabulary_size=30522, num_layers=12, num_heads=12, hidden_dim=768,
            intermediate_dim=3072, max_sequence_length=512,
        )
        ours = check_parity(peer, sequence_length=128, atol=1e-4)
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
