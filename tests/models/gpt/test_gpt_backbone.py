import numpy as np
import pytest

from kerasbert.models import from_preset
from kerasbert.models import list_presets
from kerasbert.models.gpt import GptBackbone
from kerasbert.testing import TestCase
from kerasbert.testing import tiny_encoder_config
from kerasbert.testing import tiny_encoder_inputs

from slow_marks import slow_covered_by

KWARGS = tiny_encoder_config(dropout=0.0)
INPUTS = tiny_encoder_inputs(seed=5, segments=False)


class TestGptBackbone(TestCase):
    def test_backbone_basics(self):
        # The shared checks (right padding is invisible to the causal model
        # too; type ids are ignored: no segment table), plus finite
        # mixed_float16 / mixed_bfloat16 outputs with a fully padded row.
        self.run_backbone_test(GptBackbone, KWARGS, INPUTS)

    def test_output_at_t_does_not_depend_on_later_tokens(self):
        # Weights 25x the usual 0.02 spread: a changed token then moves every
        # later output far beyond the 1e-3 the check asks (at 0.02 one seed
        # gave 8.6e-4), while causality stays exact.
        model = GptBackbone(**dict(KWARGS, initializer_range=0.5))
        base = model(INPUTS)["sequence_output"].numpy()
        for t in range(7):
            changed = {k: v.copy() for k, v in INPUTS.items()}
            changed["input_word_ids"][:, t + 1:] = (changed["input_word_ids"][:, t + 1:] + 7) % 50
            out = model(changed)["sequence_output"].numpy()
            np.testing.assert_allclose(out[:, : t + 1], base[:, : t + 1], atol=1e-5)
            # ... while the changed positions themselves do change (the test
            # would pass trivially for a model that ignored its input).
            assert np.abs(out[0, t + 1:] - base[0, t + 1:]).max() > 1e-3
        # And earlier tokens DO reach later positions.
        changed = {k: v.copy() for k, v in INPUTS.items()}
        changed["input_word_ids"][:, 0] = (changed["input_word_ids"][:, 0] + 1) % 50
        out = model(changed)["sequence_output"].numpy()
        assert np.abs(out[0, -1] - base[0, -1]).max() > 1e-3

    def test_every_layer_is_causal(self):
        model = GptBackbone(**KWARGS)
        changed = {k: v.copy() for k, v in INPUTS.items()}
        changed["input_word_ids"][:, 4:] = 3
        a, b = model(INPUTS), model(changed)
        for x, y in zip(a["encoder_outputs"], b["encoder_outputs"]):
            self.assertAllClose(x[:, :4], y[:, :4], atol=1e-5)

    def test_pooled_output_is_last_real_token(self):
        model = GptBackbone(**KWARGS)
        out = model(INPUTS)
        self.assertAllClose(out["sequence_output"][0, 7], out["pooled_output"][0])
        self.assertAllClose(out["sequence_output"][1, 4], out["pooled_output"][1])
        assert not hasattr(model, "pooler") or model.pooler is None

    def test_architecture_is_gpt1s(self):
        model = GptBackbone(**KWARGS)
        # No embedding LayerNorm, no segment table; tanh GELU; eps 1e-5.
        assert model.embeddings.layer_norm is None
        assert model.embeddings.segment_embedding is None
        assert not any("embeddings/layer_norm" in w.path for w in model.weights)
        block = model.transformer_layers[0]
        assert block.activation == "gelu_approximate"
        assert block.layer_norm_epsilon == 1e-5
        config = model.get_config()
        assert GptBackbone.from_config(config).get_config() == config

    def test_mixed_float16_long_padding_is_finite(self):
        model = GptBackbone(**KWARGS, dtype="mixed_float16")
        inputs = dict(INPUTS, input_mask=np.array([[1] + [0] * 7, [0] * 8], "int32"))
        self.assertAllFinite(model(inputs))


class TestGptPresets(TestCase):
    def test_gpt1_parameter_count_by_parts(self):
        # The whole model takes ~10 s to initialise on 2 cores; here one
        # layer at the preset's widths, the embeddings added analytically.
        one_layer = GptBackbone.from_preset(
            "gpt1", num_layers=1, vocabulary_size=1, max_sequence_length=1
        )
        per_layer = one_layer.count_params() - (1 + 1) * 768  # no embedding LN
        assert per_layer == 7_087_872
        assert 40478 * 768 + 512 * 768 + 12 * per_layer == 116_534_784

    # Builds gpt1 whole (117M weights); the default suite adds up one layer at its widths.
    @slow_covered_by("tests/models/gpt/test_gpt_backbone.py::TestGptPresets::test_gpt1_parameter_count_by_parts")
    def test_gpt1_parameter_count(self):
        model = from_preset("gpt1")
        assert isinstance(model, GptBackbone)
        assert model.count_params() == 116_534_784
        assert model.num_layers == 12 and model.num_heads == 12
        assert model.embeddings.position_embedding.position_embeddings.shape == (512, 768)

    def test_registered(self):
        assert list_presets("gpt") == ["gpt1"]
        with pytest.raises(ValueError, match="not a"):
            from kerasbert.models import BertBackbone

            BertBackbone.from_preset("gpt1")
