"""ELMo's published layout (options.json + weights.hdf5): the committed
names and shapes of the real files, and a weight file written here in that
layout loaded through the handle loaders, every layer equal to a NumPy
reference of the published biLM."""

import json
import re
import tempfile
import os
import sys

import h5py
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import numpy as np
import pytest

from kerasbert.convert.elmo_weights import config_from_options
from kerasbert.convert.elmo_weights import load_elmo
from kerasbert.convert.elmo_weights import published_shapes
from kerasbert.convert.elmo_weights import read_hdf5
from kerasbert.convert.elmo_weights import save_elmo
from kerasbert.errors import CheckpointError
from kerasbert.sources import source
from kerasbert.models import Backbone
from kerasbert.models import ElmoBackbone
from kerasbert.models.presets import get_preset
from kerasbert.text.elmo_characters import batch_char_ids

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "models", "elmo"))
from elmo_reference import elmo_layers  # noqa: E402
from elmo_reference import random_weights  # noqa: E402
from reliability.console import in_process  # noqa: E402
from reliability.console import one_line_error  # noqa: E402

TINY_OPTIONS = {
    "lstm": {"use_skip_connections": True, "projection_dim": 6, "cell_clip": 3, "proj_clip": 3,
             "dim": 10, "n_layers": 2},
    "char_cnn": {"activation": "relu", "filters": [[1, 4], [2, 6], [3, 8]], "n_highway": 2,
                 "embedding": {"dim": 5}, "n_characters": 262, "max_characters_per_token": 12},
}
SENTENCES = [["Deep", "contextualized", "word", "vectors", "."], ["한국어", "!"], ["a"]]


def write_elmo_dir(folder, options, weights, prefix=""):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, prefix + "options.json"), "w") as f:
        json.dump(options, f)
    with h5py.File(os.path.join(folder, prefix + "weights.hdf5"), "w") as f:
        for name, value in weights.items():
            f.create_dataset(name, data=value)
    return str(folder)


@pytest.mark.parametrize("name,preset", [("original", "elmo_original"), ("small", "elmo_small")])
def test_published_names_and_shapes(name, preset):
    with open(os.path.join(HERE, "fixtures", f"elmo_{name}.json")) as f:
        fixture = json.load(f)
    config = config_from_options(fixture["options"])
    assert published_shapes(config) == fixture["datasets"]
    assert ElmoBackbone.bilm_parameters(config) == fixture["parameters"]
    # The preset is the published architecture.
    assert {**config} == {**get_preset(preset)["config"]}


@pytest.mark.parametrize("prefix", ["", "elmo_2x10_6_18cnn_2xhighway_"])
def test_weight_file_matches_numpy_reference(tmp_path, prefix):
    weights = random_weights(TINY_OPTIONS, seed=3)
    folder = write_elmo_dir(tmp_path / "elmo", TINY_OPTIONS, weights, prefix)
    assert source.resolve(folder).kind == source.ELMO
    backbone = Backbone.from_preset(folder)  # through loading/published.py
    assert isinstance(backbone, ElmoBackbone)
    ids, mask = batch_char_ids(SENTENCES, max_characters=12)
    out = backbone({"input_char_ids": ids, "input_mask": mask})
    got = np.stack([np.asarray(x) for x in out["encoder_outputs"]], axis=1)
    expected = elmo_layers(weights, TINY_OPTIONS, ids, mask)
    assert got.shape == expected.shape == (3, 3, 5, 12)
    assert np.abs(expected).max() > 0.1  # the check is on real values
    np.testing.assert_allclose(got, expected, atol=1e-5)
    # The mix starts as the average of the three layers.
    np.testing.assert_allclose(np.asarray(out["sequence_output"]), expected.mean(1), atol=1e-5)


def test_round_trip_and_overrides(tmp_path):
    weights = random_weights(TINY_OPTIONS, seed=4)
    folder = write_elmo_dir(tmp_path / "elmo", TINY_OPTIONS, weights)
    backbone = load_elmo(folder, freeze_bilm=True)
    assert len(backbone.trainable_weights) == 2
    save_elmo(backbone, tmp_path / "again")
    again = read_hdf5(os.path.join(tmp_path, "again", "weights.hdf5"))
    assert sorted(again) == sorted(weights)
    for name in weights:
        np.testing.assert_array_equal(again[name], weights[name])
    with pytest.raises(CheckpointError, match="lstm_dim=12 contradicts"):
        load_elmo(folder, lstm_dim=12)


def test_mismatched_shape_names_the_dataset(tmp_path):
    weights = random_weights(TINY_OPTIONS, seed=5)
    weights["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"] = np.zeros((10, 7), "float32")
    folder = write_elmo_dir(tmp_path / "bad", TINY_OPTIONS, weights)
    with pytest.raises(CheckpointError) as err:
        load_elmo(folder)
    message = str(err.value)
    assert "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0" in message
    assert "[10, 7]" in message and "[10, 6]" in message
    del weights["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"]
    folder = write_elmo_dir(tmp_path / "missing", TINY_OPTIONS, weights)
    with pytest.raises(CheckpointError, match="no dataset RNN_1/.*W_P_0"):
        load_elmo(folder)
    # The command line (in process): one line, exit 2.
    one_line_error(in_process("info", "--preset", tmp_path / "bad"),
                   "W_P_0 has shape [10, 7]")


def _lying(options, path, value):
    """`options` with the value at `path` ("lstm.dim") replaced."""
    lied = json.loads(json.dumps(options))
    *parents, key = path.split(".")
    node = lied
    for parent in parents:
        node = node[parent]
    node[key] = value
    return lied


# Issue 51: a 300-byte options.json beside a small weight file declared a
# model of gigabytes, which was built (5 GB, then a traceback) before its
# shapes met the file's.
LIES = {
    "char_cnn.filters": ([[1, 16384], [2, 6], [3, 8]], "CNN/W_cnn_0 has shape [1, 1, 5, 4]"),
    "lstm.dim": (2**24, "W_0 has shape [12, 40], the options call for [12, 67108864]"),
    "char_cnn.max_characters_per_token": (10**9, "max_characters_per_token=1000000000: at most"),
}


@pytest.mark.parametrize("path", sorted(LIES))
def test_options_that_lie_about_the_weights_are_refused_before_building(tmp_path, path):
    value, fragment = LIES[path]
    folder = write_elmo_dir(tmp_path / "lie", _lying(TINY_OPTIONS, path, value),
                            random_weights(TINY_OPTIONS, seed=5))
    with pytest.raises(CheckpointError, match=re.escape(fragment)):
        load_elmo(folder)


@pytest.mark.parametrize("path,command", [("lstm.dim", "info"),
                                          ("char_cnn.max_characters_per_token", "extract-features"),
                                          ("char_cnn.filters", "extract-features")])
def test_a_lying_options_file_is_one_line_from_the_console(tmp_path, path, command):
    """The installed script, fresh process: rc 2, one line, nothing
    written, and the peak memory of a process that built nothing (under
    1 GB; the issue saw 3.9 to 8.4 GB)."""
    from reliability.console import measured

    value, fragment = LIES[path]
    write_elmo_dir(tmp_path / "lie", _lying(TINY_OPTIONS, path, value),
                   random_weights(TINY_OPTIONS, seed=5))
    (tmp_path / "in.txt").write_text("ELMo reads characters.\n")
    args = ["--preset", "lie"]
    if command == "extract-features":
        args += ["--input", "in.txt", "--output", "out.jsonl"]
    result, peak = measured(command, *args, cwd=tmp_path)
    one_line_error(result, fragment)
    assert peak < 2**30, f"peak RSS {peak / 2**20:.0f} MiB"
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "lie"]


# Issue 51: the property-based check of the checkpoint reader, on ELMo
# folders: any one value of options.json replaced by any JSON value loads
# (only when it is the true value) or is refused as a CheckpointError or
# UsageError; never another exception, never a model the file cannot fill.
OPTION_PATHS = ("lstm.dim", "lstm.projection_dim", "lstm.n_layers", "lstm.cell_clip",
                "char_cnn.n_highway", "char_cnn.embedding.dim", "char_cnn.n_characters",
                "char_cnn.max_characters_per_token", "char_cnn.activation", "char_cnn.filters")
JSON_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 2**40),
                        st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=4),
                        st.lists(st.lists(st.integers(-2, 20), max_size=3), max_size=3))


def _value_at(options, path):
    for key in path.split("."):
        options = options[key]
    return options


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(OPTION_PATHS), value=JSON_VALUES)
def test_any_changed_option_loads_only_when_true_else_is_refused(path, value):
    from kerasbert.errors import UsageError

    folder = write_elmo_dir(tempfile.mkdtemp(), _lying(TINY_OPTIONS, path, value), _WEIGHTS)
    try:
        backbone = load_elmo(folder)
    except (CheckpointError, UsageError) as err:
        assert "\n" not in str(err)
        return
    true = _value_at(TINY_OPTIONS, path)
    # accepted: the value means what the file holds (3 == 3.0, n_characters
    # is read from the file's table, a clip is any number)
    assert value == true or path in ("char_cnn.n_characters", "lstm.cell_clip"), (path, value)
    assert backbone.count_params() > 0


_WEIGHTS = random_weights(TINY_OPTIONS, seed=5)
