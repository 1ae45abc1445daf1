import pytest

from kerasbert.models import BertBackbone
from kerasbert.models import UnknownPresetError
from kerasbert.models import list_presets
from kerasbert.testing import TestCase
from kerasbert.testing import tiny_encoder_config
from kerasbert.testing import tiny_encoder_inputs

from slow_marks import slow_covered_by


class TestBertBackbone(TestCase):
    def test_backbone_basics(self):
        # Shapes, round trips, TF Hub names, padding, type ids, SavedModel,
        # half precision: the shared checks on the tiny encoder.
        self.run_backbone_test(BertBackbone)

    def test_factorized_embedding(self):
        model = BertBackbone(**tiny_encoder_config(embedding_dim=8))
        inputs = tiny_encoder_inputs()
        assert model(inputs)["sequence_output"].shape == (2, 8, 16)
        assert tuple(model.token_embedding.embeddings.shape) == (50, 8)
        self.run_model_saving_test(model, inputs)

    def test_token_embedding_is_shared_with_heads(self):
        model = BertBackbone(**tiny_encoder_config())
        assert tuple(model.token_embedding.embeddings.shape) == (50, 16)


class TestBertPresets(TestCase):
    def test_published_parameter_counts_by_parts(self):
        # Building bert_base and bert_large takes ~14 s on 2 cores
        # (initialising 445M weights), so the default suite measures one
        # layer and the pooler at each preset's widths and adds the tables;
        # the slow test below builds both whole models.
        for name, width, ffn, layers, count in (("bert_base", 768, 3072, 12, 109482240),
                                                ("bert_large", 1024, 4096, 24, 335141888)):
            one_layer = BertBackbone.from_preset(name, num_layers=1, vocabulary_size=1,
                                                 max_sequence_length=1)
            pooler = width * width + width
            per_layer = one_layer.count_params() - pooler - (1 + 1 + 2) * width - 2 * width
            assert per_layer == (4 * (width * width + width) + 2 * width * ffn + ffn + width
                                 + 4 * width), name
            embeddings = (30522 + 512 + 2) * width + 2 * width  # tokens, positions, types, LN
            assert embeddings + layers * per_layer + pooler == count, name

    # 14 s: builds the whole bert_base and bert_large; the default suite adds up one layer of each.
    @slow_covered_by(
        "tests/models/bert/test_bert_backbone.py::TestBertPresets::test_published_parameter_counts_by_parts",
        "tests/test_cli.py::test_info_prints_architecture_and_count")
    def test_published_parameter_counts(self):
        assert BertBackbone.from_preset("bert_base").count_params() == 109482240
        assert BertBackbone.from_preset("bert_large").count_params() == 335141888

    def test_small_bert_grid(self):
        names = list_presets("BertBackbone")
        for layers in (2, 4, 6, 8, 10, 12):
            for hidden in (128, 256, 512, 768):
                assert f"bert_L{layers}_H{hidden}" in names
        for name in ("bert_tiny", "bert_mini", "bert_small", "bert_medium"):
            assert name in names
        tiny = BertBackbone.from_preset("bert_tiny")
        grid = BertBackbone.from_preset("bert_L2_H128")
        assert tiny.get_config() | {"name": None} == grid.get_config() | {"name": None}
        assert (tiny.num_layers, tiny.hidden_dim, tiny.num_heads) == (2, 128, 2)
        assert tiny.intermediate_dim == 512
        medium = BertBackbone.from_preset("bert_medium")
        assert (medium.num_layers, medium.hidden_dim, medium.num_heads) == (8, 512, 8)

    def test_overrides(self):
        model = BertBackbone.from_preset("bert_tiny", vocabulary_size=100, num_layers=1)
        assert model.vocabulary_size == 100 and model.num_layers == 1

    def test_unknown_preset_lists_valid_names(self):
        with pytest.raises(UnknownPresetError, match="bert_tiny") as err:
            BertBackbone.from_preset("bert_tinny")
        assert "Did you mean bert_tiny" in str(err.value)

    def test_bad_override_lists_valid_arguments(self):
        with pytest.raises(ValueError, match="hidden_size.*valid: vocabulary_size"):
            BertBackbone.from_preset("bert_tiny", hidden_size=3)
