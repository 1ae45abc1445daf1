import numpy as np
import pytest

from kerasbert.models import AlbertBackbone
from kerasbert.models import from_preset
from kerasbert.models import list_presets
from kerasbert.models.albert.albert_presets import ALBERT_PARAMETER_COUNTS
from kerasbert.testing import TestCase

KWARGS = dict(
    vocabulary_size=50,
    num_layers=4,
    num_heads=2,
    hidden_dim=16,
    intermediate_dim=32,
    embedding_dim=8,
    max_sequence_length=12,
)
RNG = np.random.RandomState(3)
INPUTS = {
    "input_word_ids": RNG.randint(0, 50, (2, 8)).astype("int32"),
    "input_mask": np.array([[1] * 8, [1] * 5 + [0] * 3], "int32"),
    "input_type_ids": np.array([[0] * 4 + [1] * 4] * 2, "int32"),
}
SHAPES = {
    "sequence_output": (2, 8, 16),
    "pooled_output": (2, 16),
    "encoder_outputs": [(2, 8, 16)] * 4,
}


class TestAlbertBackbone(TestCase):
    def test_backbone_basics(self):
        self.run_backbone_test(AlbertBackbone, KWARGS, INPUTS, SHAPES)

    def test_groups_and_inner_repetitions(self):
        model = self.run_backbone_test(
            AlbertBackbone,
            {**KWARGS, "num_groups": 2, "num_inner_repetitions": 2},
            INPUTS,
            SHAPES,
            run_precision_check=False,
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

    def test_tf_hub_tensor_names(self):
        model = AlbertBackbone(**KWARGS)
        assert sorted(model.input) == ["input_mask", "input_type_ids", "input_word_ids"]
        for tensor in model.input.values():
            assert tensor.dtype == "int32"
        assert sorted(model.output) == [
            "encoder_outputs", "pooled_output", "sequence_output"
        ]

    def test_padding_is_invisible_to_real_tokens(self):
        model = AlbertBackbone(**KWARGS)
        changed = {k: v.copy() for k, v in INPUTS.items()}
        changed["input_word_ids"][1, 5:] = 7
        a, b = model(INPUTS), model(changed)
        self.assertAllClose(a["sequence_output"][1, :5], b["sequence_output"][1, :5])
        self.assertAllClose(a["pooled_output"][1], b["pooled_output"][1])

    def test_saved_model_export(self):
        # The shared block is saved once and still applied once per layer.
        self.run_saved_model_test(AlbertBackbone(**{**KWARGS, "num_layers": 2}), INPUTS)

    def test_defaults_follow_albert(self):
        model = AlbertBackbone(
            vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=16,
            intermediate_dim=32,
        )
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

    @pytest.mark.slow
    @pytest.mark.parametrize("name", ["albert_large", "albert_xlarge", "albert_xxlarge"])
    def test_published_parameter_counts(self, name):
        # large 17,683,968; xlarge 58,724,864; xxlarge 222,595,584 (equal to
        # keras-hub's AlbertBackbone of the same config).
        model = AlbertBackbone.from_preset(name)
        assert model.count_params() == ALBERT_PARAMETER_COUNTS[name]
