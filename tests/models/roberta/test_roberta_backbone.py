import pytest

from kerasbert.models import from_preset
from kerasbert.models.roberta import RobertaBackbone
from kerasbert.testing import TestCase
from kerasbert.testing import tiny_encoder_config
from kerasbert.testing import tiny_encoder_inputs

from slow_marks import slow_covered_by

KWARGS = tiny_encoder_config()
INPUTS = tiny_encoder_inputs(segments=False)


class TestRobertaBackbone(TestCase):
    def test_backbone_basics(self):
        # The shared checks; type ids are ignored (no segment table).
        self.run_backbone_test(RobertaBackbone, input_data=INPUTS)

    def test_pooled_output_is_first_token_without_weights(self):
        model = RobertaBackbone(**KWARGS)
        out = model(INPUTS)
        self.assertAllClose(out["sequence_output"][:, 0], out["pooled_output"])
        assert model.pooler is None
        assert RobertaBackbone.classifier_activation == "tanh"
        assert not any("pooler" in w.path for w in model.weights)
        assert model.embeddings.segment_embedding is None

    def test_token_embedding_and_config(self):
        model = RobertaBackbone(**KWARGS)
        assert tuple(model.token_embedding.embeddings.shape) == (50, 16)
        config = model.get_config()
        assert config["layer_norm_epsilon"] == 1e-5
        assert "num_segments" not in config
        revived = RobertaBackbone.from_config(config)
        assert revived.get_config() == config


class TestRobertaPresets(TestCase):
    def test_roberta_base_parameter_count_by_parts(self):
        # Building roberta_base takes ~10 s on 2 cores (initialising 124M
        # weights), so the default suite measures one layer and the
        # embeddings at the preset's widths and adds them up; the slow test
        # below builds the whole model.
        one_layer = RobertaBackbone.from_preset(
            "roberta_base", num_layers=1, vocabulary_size=1, max_sequence_length=1
        )
        per_layer = one_layer.count_params() - (1 + 1 + 2) * 768
        embeddings = 50265 * 768 + 512 * 768 + 2 * 768  # tokens, positions, LN
        assert embeddings + 12 * per_layer == 124_052_736

    # ~10 s: builds roberta_base whole; the default suite adds up one layer at its widths.
    @slow_covered_by(
        "tests/models/roberta/test_roberta_backbone.py::TestRobertaPresets::test_roberta_base_parameter_count_by_parts")
    def test_roberta_base_parameter_count(self):
        # keras-hub's count: 50265 tokens, 512 positions, no pooler.
        model = RobertaBackbone.from_preset("roberta_base")
        assert model.count_params() == 124_052_736
        assert model.embeddings.position_embedding.position_embeddings.shape == (512, 768)

    # Builds roberta_large and keras-hub's peer whole (354M weights each); the default suite
    # counts roberta_base by parts and converts keras-hub's RoBERTa at tiny size.
    @slow_covered_by(
        "tests/models/roberta/test_roberta_backbone.py::TestRobertaPresets::test_roberta_base_parameter_count_by_parts",
        "tests/convert/test_roberta_convert.py::TestRobertaKerasHubConversion::test_parity_on_padded_rows")
    def test_roberta_large_parameter_count(self):
        import keras_hub

        model = from_preset("roberta_large")
        assert isinstance(model, RobertaBackbone)
        assert model.count_params() == 354_307_072
        peer = keras_hub.models.RobertaBackbone(
            vocabulary_size=50265, num_layers=24, num_heads=16,
            hidden_dim=1024, intermediate_dim=4096, max_sequence_length=512,
        )
        assert peer.count_params() == model.count_params()

    def test_overrides_and_wrong_family(self):
        from kerasbert.models import BertBackbone

        model = RobertaBackbone.from_preset(
            "roberta_base", num_layers=1, vocabulary_size=100
        )
        assert model.num_layers == 1 and model.hidden_dim == 768
        with pytest.raises(ValueError, match="RobertaBackbone"):
            BertBackbone.from_preset("roberta_base")
        with pytest.raises(ValueError, match="num_segments"):
            RobertaBackbone.from_preset("roberta_base", num_segments=2)
