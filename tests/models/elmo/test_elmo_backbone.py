"""ElmoBackbone: the shared backbone checks that apply to a character-input
encoder, its own facts, and the published presets' parameter counts."""

import numpy as np
import pytest

from kerasbert.models import ElmoBackbone
from kerasbert.models import from_preset
from kerasbert.models.config_checks import ConfigError
from kerasbert.models.presets import get_preset
from kerasbert.testing import TestCase
from kerasbert.text.elmo_characters import batch_char_ids
from reliability.console import kerasbert as console
from reliability.console import ok
from reliability.console import one_line_error
from slow_marks import slow_covered_by

TINY = dict(lstm_dim=8, projection_dim=4, num_layers=2, num_highway=1,
            filters=[[1, 4], [2, 4]], max_characters_per_token=10)
SENTENCES = [["The", "cat", "sat", "."], ["한국어", "ok"], ["x"]]
IDS, MASK = batch_char_ids(SENTENCES, max_characters=10)
INPUTS = {"input_char_ids": IDS, "input_mask": MASK}
OUTPUT_SHAPES = {"sequence_output": (3, 4, 8), "pooled_output": (3, 8),
                 "encoder_outputs": [(3, 4, 8)] * 3}


def _shapes(outputs):
    return {k: [tuple(x.shape) for x in v] if isinstance(v, list) else tuple(v.shape)
            for k, v in outputs.items()}


class TestElmoBackbone(TestCase):
    def test_shared_checks(self):
        # run_backbone_test assumes token ids ([B, T] input_word_ids); the
        # checks that apply to character input are its own helpers:
        # registration and config round trip, .keras in safe mode, a
        # SavedModel endpoint without Keras, and half precision.
        backbone = ElmoBackbone(**TINY)
        assert _shapes(backbone(INPUTS)) == OUTPUT_SHAPES
        assert sorted(backbone.input) == ["input_char_ids", "input_mask"]
        self.run_serialization_test(backbone)
        self.run_model_saving_test(backbone, INPUTS)
        self.run_saved_model_test(backbone, INPUTS)
        padded = {**INPUTS, "input_mask": MASK.copy()}
        padded["input_mask"][-1] = 0  # a row without words
        for policy in ("mixed_float16", "mixed_bfloat16"):
            model = ElmoBackbone(**TINY, dtype=policy)
            self.assertAllFinite(model(padded), f"under {policy}")
            assert all(w.dtype == "float32" for w in model.weights)
            assert ElmoBackbone.from_config(model.get_config()).dtype_policy.name == policy

    def test_padding_and_sentence_boundaries(self):
        backbone = ElmoBackbone(**TINY)
        out = backbone(INPUTS)
        layers = np.stack([np.asarray(x) for x in out["encoder_outputs"]])
        # Zeros at padded words; a row's words do not see other rows' lengths.
        assert not layers[:, 1, 2:].any() and not layers[:, 2, 1:].any()
        alone = backbone({"input_char_ids": IDS[1:2, :2], "input_mask": MASK[1:2, :2]})
        np.testing.assert_allclose(np.asarray(alone["encoder_outputs"][2])[0],
                                   layers[2, 1, :2], atol=1e-5)
        # Layer 0 is the token vector twice; the forward half of layer 1 at
        # word k reads words <= k only (and <S>), the backward half words >= k.
        np.testing.assert_array_equal(layers[0, ..., :4], layers[0, ..., 4:])
        changed = IDS.copy()
        changed[0, 3] = IDS[0, 0]
        after = np.asarray(backbone({**INPUTS, "input_char_ids": changed})["encoder_outputs"][1])
        np.testing.assert_allclose(after[0, :3, :4], layers[1, 0, :3, :4], atol=1e-6)
        assert np.abs(after[0, :3, 4:] - layers[1, 0, :3, 4:]).max() > 1e-4

    def test_without_boundaries_and_frozen(self):
        backbone = ElmoBackbone(**TINY, add_sentence_boundaries=False, freeze_bilm=True,
                                dropout=0.5)
        assert _shapes(backbone(INPUTS)) == OUTPUT_SHAPES
        # Frozen: only the scalar mix (3 weights and gamma) trains.
        assert [w.path for w in backbone.trainable_weights] == [
            "scalar_mix/mix_weights", "scalar_mix/gamma"]
        revived = ElmoBackbone.from_config(backbone.get_config())
        assert len(revived.trainable_weights) == 2

    def test_bad_configs_are_refused(self):
        for bad, fragment in ((dict(filters=[[12, 4]]), "wider than"),
                              (dict(activation="gelu"), "relu or tanh"),
                              (dict(lstm_dim=0), "lstm_dim=0"),
                              (dict(filters=[[1]]), "[width, count]")):
            with pytest.raises(ConfigError) as err:
                ElmoBackbone.preset_config("elmo_small", **{**TINY, **bad})
            assert fragment in str(err.value), (bad, str(err.value))


@pytest.mark.parametrize("name,count", [("elmo_small", 13_593_296),
                                        ("elmo_medium", 28_027_728),
                                        ("elmo_original", 93_600_848)])
def test_presets_have_the_published_counts(name, count):
    # 13.6M / 28.0M / 93.6M in the paper's convention (no softmax).
    assert ElmoBackbone.bilm_parameters(get_preset(name)["config"]) == count
    assert f"{count:,}" in get_preset(name)["description"]


def test_small_preset_builds_with_that_count():
    backbone = from_preset("elmo_small")
    assert backbone.count_params() == 13_593_296 + 4  # plus the scalar mix
    assert ElmoBackbone.estimate_parameters(backbone.get_config()) == backbone.count_params()
    assert dict(backbone.parameter_parts())["biLM (as published, no softmax)"] == 13_593_296


# 19 s: two fresh console-script processes; the default suite runs `kerasbert info` as a
# console script (the Transformer's count), on an ELMo weight directory in process, prints
# counts through `info` in process and checks the presets' published counts.
@slow_covered_by(
    "tests/models/transformer/test_transformer_backbone.py::TestTransformerBackbone::test_info_prints_the_count_through_the_console_script",
    "tests/convert/test_elmo_weights.py::test_mismatched_shape_names_the_dataset",
    "tests/models/elmo/test_elmo_backbone.py::test_presets_have_the_published_counts",
    "tests/models/elmo/test_elmo_backbone.py::test_small_preset_builds_with_that_count",
    "tests/test_cli.py::test_info_for_every_family")
def test_console_info_prints_the_published_count(tmp_path):
    out = ok(console("info", "--preset", "elmo_original", cwd=tmp_path))
    assert "ElmoBackbone" in out
    line = next(l for l in out.splitlines() if "biLM (as published" in l)
    assert line.split()[-1] == "93,600,848"
    one_line_error(console("info", "--preset", "elmo_small", "--set", "activation=gelu",
                           cwd=tmp_path), "activation='gelu'")


def test_a_saved_elmo_keras_file_needs_no_vocab(tmp_path):
    """`finetune --backbone elmo.keras` is told apart from a BERT file by
    the archive's config.json alone (before TensorFlow loads)."""
    from kerasbert.models import BertBackbone
    from kerasbert.testing.fixtures import tiny_encoder_config
    from kerasbert.training.configs import reads_characters

    elmo = tmp_path / "elmo.keras"
    ElmoBackbone(**TINY).save(elmo)
    bert = tmp_path / "bert.keras"
    BertBackbone(**tiny_encoder_config()).save(bert)
    (tmp_path / "broken.keras").write_bytes(b"not a zip")
    assert reads_characters(str(elmo)) is True
    assert reads_characters(str(bert)) is False
    assert reads_characters(str(tmp_path / "broken.keras")) is False
