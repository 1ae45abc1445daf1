import numpy as np
import pytest
from reliability.console import kerasbert
from reliability.console import ok

from kerasbert.models import TransformerBackbone
from kerasbert.models import from_preset
from kerasbert.models import list_presets
from kerasbert.models.config_checks import ConfigError
from kerasbert.models.transformer.transformer_presets import TRANSFORMER_BASE_PARAMETERS
from kerasbert.models.transformer.transformer_presets import TRANSFORMER_BIG_PARAMETERS
from kerasbert.models.transformer.transformer_presets import TRANSFORMER_PRESETS
from kerasbert.testing import TestCase

KWARGS = dict(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
              intermediate_dim=32, dropout=0.0, max_sequence_length=24)


def _inputs(seed=0, batch=3, source=7, target=5):
    """Right-padded sources ending in id 1, targets starting with id 2."""
    rng = np.random.default_rng(seed)
    src = rng.integers(3, 50, (batch, source)).astype("int32")
    tgt = rng.integers(3, 50, (batch, target)).astype("int32")
    src_mask = np.ones_like(src)
    tgt_mask = np.ones_like(tgt)
    for i in range(1, batch):
        src_mask[i, source - 2 * i:] = 0
        tgt_mask[i, target - i:] = 0
    tgt[:, 0] = 2
    return {"encoder_token_ids": src * src_mask, "encoder_padding_mask": src_mask,
            "decoder_token_ids": tgt * tgt_mask, "decoder_padding_mask": tgt_mask}


INPUTS = _inputs()
MASKS = ("encoder_padding_mask", "decoder_padding_mask")


class TestTransformerBackbone(TestCase):
    def test_backbone_basics(self):
        # The shared checks that apply to an encoder-decoder: shapes, config
        # round trip, a shorter input without rebuilding, `.keras`, the
        # SavedModel endpoint, and finite half precision with a fully padded
        # row (both masks zero).
        self.run_backbone_test(
            TransformerBackbone, KWARGS, INPUTS, expected_output_shape=(3, 5, 16),
            run_contract_check=False, run_padding_check=False, run_type_ids_check=False,
            sequence_input="decoder_token_ids", mask_inputs=MASKS)

    def test_pre_ln_model_garden_layout_round_trips(self):
        kwargs = dict(KWARGS, norm_first=True, position_encoding="concatenated")
        model = self.run_backbone_test(
            TransformerBackbone, kwargs, INPUTS, expected_output_shape=(3, 5, 16),
            run_contract_check=False, run_padding_check=False, run_type_ids_check=False,
            run_saved_model_check=False, run_precision_check=False,
            sequence_input="decoder_token_ids", mask_inputs=MASKS)
        assert model.encoder_norm is not None and model.decoder_norm is not None

    @pytest.mark.parametrize("norm_first", [False, True])
    def test_incremental_decoding_equals_the_full_decoder(self, norm_first):
        model = TransformerBackbone(**KWARGS, norm_first=norm_first)
        full = np.asarray(model(INPUTS))
        memory = model.decoding_memory(
            model.encode(INPUTS["encoder_token_ids"], INPUTS["encoder_padding_mask"]),
            INPUTS["encoder_padding_mask"])
        cache = model.decoding_cache(3, 8)
        steps = []
        for i in range(5):
            hidden, cache = model.decode_step(INPUTS["decoder_token_ids"][:, i], i, cache, memory)
            steps.append(np.asarray(hidden))
        # Row 0 has no target padding; the others are right-padded, which
        # causal attention keeps away from their real positions.
        real = INPUTS["decoder_padding_mask"].astype(bool)
        np.testing.assert_allclose(np.stack(steps, 1)[real], full[real], atol=1e-5)

    def test_decoder_position_depends_only_on_earlier_targets_and_real_sources(self):
        model = TransformerBackbone(**KWARGS)
        base = np.asarray(model(INPUTS))
        later = {k: v.copy() for k, v in INPUTS.items()}
        later["decoder_token_ids"][:, 3:] = (later["decoder_token_ids"][:, 3:] + 7) % 50
        out = np.asarray(model(later))
        np.testing.assert_allclose(out[:, :3], base[:, :3], atol=1e-5)
        assert np.abs(out[0, 3:] - base[0, 3:]).max() > 1e-3
        # New ids under source padding change nothing; under real tokens they do.
        padded = {k: v.copy() for k, v in INPUTS.items()}
        hidden = INPUTS["encoder_padding_mask"] == 0
        padded["encoder_token_ids"][hidden] = 9
        np.testing.assert_allclose(np.asarray(model(padded)), base, atol=1e-5)
        real = {k: v.copy() for k, v in INPUTS.items()}
        real["encoder_token_ids"][:, 0] = (real["encoder_token_ids"][:, 0] + 1) % 50
        assert np.abs(np.asarray(model(real)) - base).max() > 1e-3

    def test_logits_are_the_transposed_shared_table(self):
        model = TransformerBackbone(**KWARGS)
        hidden = np.asarray(model(INPUTS))
        table = np.asarray(model.token_embedding.embeddings)
        logits = np.asarray(model.logits(hidden))
        assert logits.dtype == np.float32 and logits.shape == (3, 5, 50)
        np.testing.assert_allclose(logits, hidden @ table.T, atol=1e-5)
        # One table: source, target and softmax share it.
        assert len([w for w in model.weights if "embeddings" in w.path]) == 1

    @pytest.mark.parametrize("norm_first", [False, True])
    def test_estimate_is_the_exact_count(self, norm_first):
        model = TransformerBackbone(**KWARGS, norm_first=norm_first)
        assert model.count_params() == TransformerBackbone.estimate_parameters(
            model.get_config())

    def test_preset_counts(self):
        assert set(list_presets("transformer")) == {"transformer_base", "transformer_big"}
        for name, count in (("transformer_base", TRANSFORMER_BASE_PARAMETERS),
                            ("transformer_big", TRANSFORMER_BIG_PARAMETERS)):
            config = TRANSFORMER_PRESETS[name]["config"]
            assert TransformerBackbone.estimate_parameters(config) == count
            assert f"{count:,}" in TRANSFORMER_PRESETS[name]["description"]
        assert TRANSFORMER_BASE_PARAMETERS == 63_045_632
        assert TRANSFORMER_BIG_PARAMETERS == 214_171_648
        # The base model built: the estimate is its count (big: 0.86 GB).
        assert from_preset("transformer_base").count_params() == 63_045_632

    def test_info_prints_the_count_through_the_console_script(self, tmp_path):
        printed = ok(kerasbert("info", "--preset", "transformer_base", cwd=tmp_path))
        assert "63,045,632" in printed
        assert "TransformerBackbone" in printed

    @pytest.mark.parametrize("override, message", [
        ({"hidden_dim": 15, "num_heads": 3}, "even width"),
        ({"position_encoding": "rotary"}, "position_encoding"),
        ({"num_heads": 3}, "divisible"),
    ])
    def test_bad_config_is_named(self, override, message):
        with pytest.raises(ConfigError, match=message):
            TransformerBackbone.preset_config("transformer_base", **override)
        with pytest.raises(ValueError, match=message):
            TransformerBackbone(**dict(KWARGS, **override))
