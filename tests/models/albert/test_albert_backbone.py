import pytest

from kerasbert.models import AlbertBackbone
from kerasbert.models import from_preset
from kerasbert.models import list_presets
from kerasbert.models.albert.albert_presets import ALBERT_PARAMETER_COUNTS
from kerasbert.testing import TestCase
from kerasbert.testing import tiny_encoder_config
from kerasbert.testing import tiny_encoder_inputs

from slow_marks import slow_covered_by

KWARGS = tiny_encoder_config(num_layers=4, embedding_dim=8)
INPUTS = tiny_encoder_inputs()


class TestAlbertBackbone(TestCase):
    def test_backbone_basics(self):
        # The shared checks; the SavedModel saves the shared block once and
        # still applies it once per layer.
        self.run_backbone_test(AlbertBackbone, KWARGS)

    def test_groups_and_inner_repetitions(self):
        model = self.run_backbone_test(
            AlbertBackbone,
            {**KWARGS, "num_groups": 2, "num_inner_repetitions": 2},
            run_precision_check=False,
            run_saved_model_check=False,
        )
        # 2 groups x 2 distinct blocks; 4 layers x 2 applications each.
        assert len(model.transformer_layers) == 8
        assert len({id(b) for b in model.transformer_layers}) == 4
        # Layers 0-1 use group 0, layers 2-3 group 1, each block in turn.
        g = model.groups
        assert model.transformer_layers == [
            g[0][0], g[0][1], g[0][0], g[0][1], g[1][0], g[1][1], g[1][0], g[1][1]
        ]

    def test_layers_share_one_block(self):
        shared = AlbertBackbone(**KWARGS)
        assert len({id(b) for b in shared.transformer_layers}) == 1
        # The encoder costs one block however many layers apply it.
        deeper = AlbertBackbone(**{**KWARGS, "num_layers": 8})
        assert deeper.count_params() == shared.count_params()
        assert len(deeper(INPUTS)["encoder_outputs"]) == 8

    def test_factorized_embedding_shapes(self):
        model = AlbertBackbone(**KWARGS)
        assert tuple(model.token_embedding.embeddings.shape) == (50, 8)
        assert tuple(model.embeddings.projection.kernel.shape) == (8, 16)

    def test_defaults_follow_albert(self):
        model = AlbertBackbone(**tiny_encoder_config(num_layers=1))
        assert model.activation == "gelu_approximate"  # ALBERT's tanh gelu
        assert model.embedding_dim == 128 and model.dropout == 0.0

    def test_bad_group_count(self):
        with pytest.raises(ValueError, match="divisible by num_groups"):
            AlbertBackbone(**{**KWARGS, "num_groups": 3})


class TestAlbertPresets(TestCase):
    def test_albert_base_parameter_count(self):
        model = AlbertBackbone.from_preset("albert_base")
        assert model.count_params() == 11_683_584
        assert (model.num_layers, model.hidden_dim, model.num_heads) == (12, 768, 12)
        assert (model.vocabulary_size, model.embedding_dim) == (30000, 128)

    def test_registered(self):
        assert list_presets("albert") == [
            "albert_base", "albert_large", "albert_xlarge", "albert_xxlarge"
        ]
        assert isinstance(from_preset("albert_base", num_layers=1), AlbertBackbone)

    # Builds the large presets whole (up to 223M weights); the default suite counts
    # albert_base built whole and checks every family's parameter estimate.
    @slow_covered_by(
        "tests/models/albert/test_albert_backbone.py::TestAlbertPresets::test_albert_base_parameter_count",
        "tests/models/test_config_validation.py::test_the_parameter_estimate_bounds_the_built_model_for_every_family")
    @pytest.mark.parametrize("name", ["albert_large", "albert_xlarge", "albert_xxlarge"])
    def test_published_parameter_counts(self, name):
        # large 17,683,968; xlarge 58,724,864; xxlarge 222,595,584 (equal to
        # keras-hub's AlbertBackbone of the same config).
        model = AlbertBackbone.from_preset(name)
        assert model.count_params() == ALBERT_PARAMETER_COUNTS[name]
