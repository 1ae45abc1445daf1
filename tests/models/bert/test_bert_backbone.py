import numpy as np
import pytest

from kerasbert.models import BertBackbone
from kerasbert.models import UnknownPresetError
from kerasbert.models import list_presets
from kerasbert.testing import TestCase

KWARGS = dict(
    vocabulary_size=50,
    num_layers=2,
    num_heads=2,
    hidden_dim=16,
    intermediate_dim=32,
    max_sequence_length=12,
)
RNG = np.random.RandomState(3)
INPUTS = {
    "input_word_ids": RNG.randint(0, 50, (2, 8)).astype("int32"),
    "input_mask": np.array([[1] * 8, [1] * 5 + [0] * 3], "int32"),
    "input_type_ids": np.array([[0] * 4 + [1] * 4] * 2, "int32"),
}


class TestBertBackbone(TestCase):
    def test_backbone_basics(self):
        self.run_backbone_test(
            BertBackbone,
            KWARGS,
            INPUTS,
            expected_output_shape={
                "sequence_output": (2, 8, 16),
                "pooled_output": (2, 16),
                "encoder_outputs": [(2, 8, 16), (2, 8, 16)],
            },
        )

    def test_factorized_embedding(self):
        model = BertBackbone(**KWARGS, embedding_dim=8)
        assert model(INPUTS)["sequence_output"].shape == (2, 8, 16)
        self.run_model_saving_test(model, INPUTS)

    def test_tf_hub_tensor_names(self):
        model = BertBackbone(**KWARGS)
        assert sorted(model.input) == [
            "input_mask", "input_type_ids", "input_word_ids"
        ]
        for tensor in model.input.values():
            assert tensor.dtype == "int32"
        assert sorted(model.output) == [
            "encoder_outputs", "pooled_output", "sequence_output"
        ]

    def test_last_encoder_output_is_sequence_output(self):
        out = BertBackbone(**KWARGS)(INPUTS)
        self.assertAllClose(out["sequence_output"], out["encoder_outputs"][-1])

    def test_padding_is_invisible_to_real_tokens(self):
        model = BertBackbone(**KWARGS)
        changed = {k: v.copy() for k, v in INPUTS.items()}
        changed["input_word_ids"][1, 5:] = 7
        a, b = model(INPUTS), model(changed)
        self.assertAllClose(
            a["sequence_output"][1, :5], b["sequence_output"][1, :5], atol=1e-6
        )
        self.assertAllClose(a["pooled_output"][1], b["pooled_output"][1], atol=1e-6)

    def test_saved_model_export(self):
        self.run_saved_model_test(BertBackbone(**KWARGS), INPUTS)

    def test_token_embedding_is_shared_with_heads(self):
        model = BertBackbone(**KWARGS)
        assert tuple(model.token_embedding.embeddings.shape) == (50, 16)


class TestBertPresets(TestCase):
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
