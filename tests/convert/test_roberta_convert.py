import os
import sys

import keras_hub
import numpy as np
import pytest

from kerasbert.convert.roberta_weights import POSITION_OFFSET
from kerasbert.convert.bert_weights import get_bert_weights as get_roberta_weights
from kerasbert.convert.roberta_weights import load_position_embeddings
from kerasbert.convert.roberta_weights import roberta_from_keras_hub
from kerasbert.convert.roberta_weights import roberta_to_keras_hub
from kerasbert.convert.roberta_weights import save_position_embeddings
from kerasbert.models.roberta import RobertaBackbone
from kerasbert.testing import TestCase

sys.path.insert(0, os.path.dirname(__file__))
from peer_fixtures import hub_inputs  # noqa: E402
from peer_fixtures import ours_inputs  # noqa: E402
from peer_fixtures import padded_batch  # noqa: E402
from peer_fixtures import randomize  # noqa: E402
from slow_marks import slow_covered_by  # noqa: E402

CONFIG = dict(
    vocabulary_size=60, num_layers=2, num_heads=2, hidden_dim=16,
    intermediate_dim=32, max_sequence_length=12,
)


class TestRobertaKerasHubConversion(TestCase):
    def test_parity_on_padded_rows(self):
        peer = randomize(keras_hub.models.RobertaBackbone(**CONFIG))
        ours = roberta_from_keras_hub(peer)
        assert ours.count_params() == peer.count_params()
        ids, mask, _ = padded_batch(60)
        expected = np.asarray(peer(hub_inputs(ids, mask)))
        got = ours(ours_inputs(ids, mask))
        np.testing.assert_allclose(
            np.asarray(got["sequence_output"]), expected, atol=1e-5
        )
        np.testing.assert_allclose(
            np.asarray(got["pooled_output"]), expected[:, 0], atol=1e-5
        )

    def test_round_trip_back_to_keras_hub(self):
        ours = randomize(RobertaBackbone(**CONFIG), seed=5)
        peer = roberta_to_keras_hub(ours)
        ids, mask, _ = padded_batch(60)
        self.assertAllClose(
            ours(ours_inputs(ids, mask))["sequence_output"],
            peer(hub_inputs(ids, mask)),
            atol=1e-5,
        )
        again = roberta_from_keras_hub(peer)
        for a, b in zip(ours.weights, again.weights):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))

    def test_refuses_what_cannot_convert_exactly(self):
        with pytest.raises(TypeError, match="RobertaBackbone"):
            roberta_from_keras_hub(keras_hub.models.BertBackbone(**CONFIG))
        other_eps = RobertaBackbone(**CONFIG, layer_norm_epsilon=1e-12)
        with pytest.raises(ValueError, match="layer_norm_epsilon=1e-05"):
            roberta_to_keras_hub(other_eps)

    # roberta_base's size (124M weights, 64 tokens); the default suite checks parity on a tiny
    # model and roberta_base's parameter count by parts.
    @slow_covered_by(
        "tests/convert/test_roberta_convert.py::TestRobertaKerasHubConversion::test_parity_on_padded_rows",
        "tests/models/roberta/test_roberta_backbone.py::TestRobertaPresets::test_roberta_base_parameter_count_by_parts")
    def test_parity_at_roberta_base_size(self):
        peer = keras_hub.models.RobertaBackbone(
            vocabulary_size=50265, num_layers=12, num_heads=12,
            hidden_dim=768, intermediate_dim=3072, max_sequence_length=512,
        )
        ours = roberta_from_keras_hub(peer)
        assert ours.count_params() == 124_052_736
        ids, mask, _ = padded_batch(50265, length=64)
        np.testing.assert_allclose(
            np.asarray(ours(ours_inputs(ids, mask))["sequence_output"]),
            np.asarray(peer(hub_inputs(ids, mask))),
            atol=1e-4,
        )


class TestOriginalPositionTable(TestCase):
    def test_offset_rows_are_dropped(self):
        # An original (fairseq / HF) table: 12 positions + 2 offset rows.
        hf = np.arange(14 * 16, dtype="float32").reshape(14, 16)
        rows = load_position_embeddings(hf, max_sequence_length=12)
        np.testing.assert_array_equal(rows, hf[POSITION_OFFSET:])
        np.testing.assert_array_equal(
            save_position_embeddings(rows)[POSITION_OFFSET:], hf[2:]
        )
        # The loaded rows put HF's position id i + 2 at our position i.
        ours = RobertaBackbone(**CONFIG)
        weights = get_roberta_weights(ours)
        weights["position_embeddings"] = rows
        from kerasbert.convert.bert_weights import set_bert_weights as set_roberta_weights

        set_roberta_weights(ours, weights)
        table = ours.embeddings.position_embedding.position_embeddings
        np.testing.assert_array_equal(np.asarray(table)[3], hf[3 + 2])

    def test_wrong_table_size_names_the_problem(self):
        with pytest.raises(ValueError, match="514 rows"):
            load_position_embeddings(np.zeros((514, 4)), max_sequence_length=128)


class TestHuggingFaceLayout(TestCase):
    def test_hf_state_dict_loads_with_offset_and_type_row(self):
        # An HF-layout state dict written from a random keras-hub model,
        # with the names and [out, in] kernels of `RobertaForMaskedLM` and
        # keras-hub's own transformers converter (convert_roberta.py).
        peer = randomize(keras_hub.models.RobertaBackbone(**CONFIG), seed=7)
        ours = roberta_from_keras_hub(peer)
        weights = get_roberta_weights(ours)
        rng = np.random.default_rng(3)
        type_row = rng.normal(0, 0.2, (1, 16)).astype("float32")
        hf = {
            "roberta.embeddings.word_embeddings.weight": weights["word_embeddings"],
            # 12 positions + 2 offset rows; the type row is added to every
            # token, so the loader must take it back out of positions.
            "roberta.embeddings.position_embeddings.weight": save_position_embeddings(
                weights["position_embeddings"] - type_row[0]
            ),
            "roberta.embeddings.token_type_embeddings.weight": type_row,
            "roberta.embeddings.LayerNorm.weight": weights["embeddings_ln_gamma"],
            "roberta.embeddings.LayerNorm.bias": weights["embeddings_ln_beta"],
            "lm_head.dense.weight": np.zeros((16, 16)),
        }
        names = {
            "query": "attention.self.query", "key": "attention.self.key",
            "value": "attention.self.value",
            "attention_output": "attention.output.dense",
            "intermediate": "intermediate.dense", "output": "output.dense",
            "attention_ln": "attention.output.LayerNorm",
            "output_ln": "output.LayerNorm",
        }
        for i, layer in enumerate(weights["layers"]):
            for key, name in names.items():
                p = f"roberta.encoder.layer.{i}.{name}"
                if key.endswith("_ln"):
                    hf[p + ".weight"], hf[p + ".bias"] = layer[key + "_gamma"], layer[key + "_beta"]
                else:
                    hf[p + ".weight"], hf[p + ".bias"] = layer[key + "_kernel"].T, layer[key + "_bias"]
        from kerasbert.convert.roberta_weights import roberta_weights_from_hf
        from kerasbert.convert.bert_weights import set_bert_weights as set_roberta_weights

        loaded = set_roberta_weights(
            RobertaBackbone(**CONFIG), roberta_weights_from_hf(hf, max_sequence_length=12)
        )
        ids, mask, _ = padded_batch(60)
        np.testing.assert_allclose(
            np.asarray(loaded(ours_inputs(ids, mask))["sequence_output"]),
            np.asarray(peer(hub_inputs(ids, mask))),
            atol=1e-5,
        )
