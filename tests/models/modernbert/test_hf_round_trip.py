"""`kerasbert convert --to hf` writes a ModernBERT folder back in the
published layout (config.json's 2024 form, model.safetensors with the
published names, tokenizer.json copied), and it reads back exactly."""

import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from kerasbert.models import Backbone
from modernbert_folders import published_config
from modernbert_folders import published_folder
from modernbert_folders import write_tokenizer
from reliability.console import in_process
from reliability.console import kerasbert
from reliability.console import ok

LINES = ["Hello world, this is ModernBERT.", "Über café naïve 한국어 文字 😀"] * 20


@pytest.fixture
def source(tmp_path):
    config = published_config(vocab_size=300)
    path, config, tensors = published_folder(tmp_path / "source", config)
    write_tokenizer(path, LINES, vocab_size=300 - 31)
    return path, config, tensors


def check_written(source, output):
    path, config, tensors = source
    written = load_file(str(output / "model.safetensors"))
    encoder = {k: v for k, v in tensors.items() if k.startswith("model.")}
    assert sorted(written) == sorted(encoder)
    assert max(np.abs(written[k] - encoder[k]).max() for k in encoder) == 0.0
    back = json.loads((output / "config.json").read_text())
    for key in ("model_type", "hidden_size", "num_hidden_layers", "norm_eps",
                "global_attn_every_n_layers", "local_attention", "global_rope_theta"):
        assert back[key] == config[key], key
    assert (output / "tokenizer.json").read_bytes() == (path / "tokenizer.json").read_bytes()
    first, again = Backbone.from_preset(str(path)), Backbone.from_preset(str(output))
    assert max(np.abs(a - b).max() for a, b in zip(first.get_weights(),
                                                     again.get_weights())) == 0.0


def test_convert_to_hf_round_trip_is_exact(source, tmp_path):
    ok(in_process("convert", "--model", source[0], "--to", "hf", "--output", tmp_path / "out"))
    check_written(source, tmp_path / "out")


def test_convert_to_hf_round_trip_at_the_console(source, tmp_path):
    ok(kerasbert("convert", "--model", source[0], "--to", "hf", "--output", tmp_path / "out",
                 cwd=tmp_path))
    check_written(source, tmp_path / "out")
