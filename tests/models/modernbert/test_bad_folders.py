"""ModernBERT folders that lie are refused in one line naming the key or
the tensor (config settings this backbone does not compute, a tensor of the
wrong shape), at the console (`kerasbert info --preset DIR`) and in process;
`info` prints the published count of modernbert_base."""

import json

import pytest

from modernbert_folders import published_config
from modernbert_folders import published_folder
from modernbert_folders import published_tensors
from reliability.console import in_process
from reliability.console import kerasbert
from reliability.console import ok
from reliability.console import one_line_error

GLOBAL, LOCAL = "full_attention", "sliding_attention"

CASES = {
    "norm_bias": (dict(norm_bias=True), ["norm_bias=True"]),
    "attention_bias": (dict(attention_bias=True), ["attention_bias=True"]),
    "mlp_bias": (dict(mlp_bias=True), ["mlp_bias=True"]),
    "activation": (dict(hidden_activation="gelu_pytorch_tanh"), ["hidden_activation"]),
    "layer_types": (dict(layer_types=[LOCAL, GLOBAL, LOCAL, LOCAL]), ["layer_types"]),
    "layer_count": (dict(layer_types=[GLOBAL, LOCAL]), ["layer_types", "4"]),
    "rope_type": (dict(rope_parameters={GLOBAL: {"rope_type": "yarn", "rope_theta": 1.0}}),
                  ["rope_type", "yarn"]),
    "rope_scaling": (dict(rope_scaling={"type": "linear", "factor": 2.0}), ["rope_scaling"]),
    "dropouts": (dict(mlp_dropout=0.1), ["dropout rates"]),
    "window": (dict(local_attention=64, sliding_window=16), ["sliding_window=16"]),
    "intermediate": (dict(intermediate_size=25), ["intermediate_size=25", "layers.0.mlp.Wi",
                                                  "(50, 32)", "(48, 32)"]),
}


def bad_folder(tmp_path, case):
    if case == "wrong_shape":
        tensors = published_tensors(published_config())
        tensors["model.layers.2.attn.Wo.weight"] = tensors["model.layers.2.attn.Wo.weight"][:31]
        return published_folder(tmp_path / case, tensors=tensors)[0], [
            "model.layers.2.attn.Wo.weight", "(31, 32)", "(32, 32)"]
    changes, fragments = CASES[case]
    config = published_config(**changes)
    return published_folder(tmp_path / case, config, published_tensors(published_config()))[0], \
        fragments


@pytest.mark.parametrize("case", [*CASES, "wrong_shape"])
def test_refused_in_one_line(tmp_path, case):
    folder, fragments = bad_folder(tmp_path, case)
    line = one_line_error(in_process("info", "--preset", folder), *fragments)
    assert all(fragment in line for fragment in fragments), line


def test_refused_in_one_line_at_the_console(tmp_path):
    for case in ("norm_bias", "wrong_shape"):
        folder, fragments = bad_folder(tmp_path, case)
        line = one_line_error(kerasbert("info", "--preset", folder, cwd=tmp_path), *fragments)
        assert all(fragment in line for fragment in fragments), line


def test_info_describes_a_folder_and_the_preset(tmp_path):
    folder = published_folder(tmp_path / "good")[0]
    out = ok(in_process("info", "--preset", folder))
    assert "ModernBertBackbone" in out or "modernbert" in out.lower(), out
    assert "149,014,272" in ok(in_process("info", "--preset", "modernbert_base"))
