"""kerasbert.sources.source: a handle is resolved once into a `Source`, and
`Backbone.from_preset` reaches the loaders through the door the package
root opens (no entry point, no import of the layers above the models)."""

import json
import os
import subprocess
import sys

import pytest

from kerasbert.errors import UsageError
from kerasbert.sources import source


def _write(path, text=""):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return path


@pytest.mark.parametrize("files, kind", [
    ({"config.json": json.dumps({"model_type": "bert"})}, source.HF),
    ({"config.json": json.dumps({"registered_name": "keras_hub>BertBackbone"})},
     source.KERAS_HUB),
    ({"bert_config.json": json.dumps({"hidden_size": 8})}, source.TF1),
    ({"saved_model.pb": ""}, source.TF_HUB),
    ({"vocab.txt": "[PAD]\n"}, source.DIRECTORY),
    ({"config.json": json.dumps({"task_type": "classification"})}, source.DIRECTORY),
])
def test_each_layout_is_one_kind(tmp_path, files, kind):
    for name, text in files.items():
        _write(str(tmp_path / name), text)
    found = source.resolve(str(tmp_path))
    assert (found.kind, found.path, found.handle) == (kind, str(tmp_path), str(tmp_path))
    assert found.is_published == (kind in source.PUBLISHED)
    if kind == source.HF:
        assert found.model_type == "bert" and found.sentence_model is None
    if kind == source.TF1:
        assert found.config == {"hidden_size": 8}


class _Registry:
    """The two questions `resolve` asks the preset registry."""

    @staticmethod
    def is_preset(name):
        return name == "bert_tiny"

    @staticmethod
    def get_preset(name):
        raise UsageError(f"Unknown preset {name!r}; did you mean bert_tiny?")


def test_presets_keras_files_and_sources_pass_through(tmp_path):
    found = source.resolve("bert_tiny", _Registry)
    assert (found.kind, found.is_preset, found.is_ours, found.label) == (
        source.PRESET, True, False, "bert_tiny")
    keras_file = _write(str(tmp_path / "m.keras"))
    found = source.resolve(keras_file)
    assert (found.kind, found.path) == (source.KERAS, keras_file)
    assert (found.is_ours, found.is_run, found.is_remote, found.label) == (
        True, False, False, "m.keras")
    assert source.resolve(found) is found
    assert source.resolve(str(tmp_path), _Registry).is_run


def test_an_unknown_bare_name_gets_the_registry_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="did you mean bert_tiny"):
        source.resolve("bert_tiyn", _Registry)
    with pytest.raises(UsageError, match="no such file or directory"):
        source.resolve("bert_tiyn")  # without a registry no name is a preset


def test_bad_handles_are_one_clear_error(tmp_path):
    with pytest.raises(UsageError, match="no such file or directory"):
        source.resolve(str(tmp_path / "missing"))
    with pytest.raises(UsageError, match="a file that is not a .keras model"):
        source.resolve(_write(str(tmp_path / "weights.bin")))
    with pytest.raises(UsageError, match="hf://OWNER/NAME"):
        source.resolve("hf://only-a-name")


def test_a_sentence_transformers_folder_carries_its_pooling(tmp_path):
    _write(str(tmp_path / "config.json"), json.dumps({"model_type": "bert", "hidden_size": 8}))
    _write(str(tmp_path / "modules.json"), json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling",
         "type": "sentence_transformers.models.Pooling"}]))
    _write(str(tmp_path / "1_Pooling" / "config.json"), json.dumps(
        {"word_embedding_dimension": 8, "pooling_mode_mean_tokens": True}))
    found = source.resolve(str(tmp_path))
    assert found.kind == source.HF and found.sentence_model is not None


def test_from_preset_needs_no_entry_point_and_no_task_import(tmp_path):
    # A fresh process: importing the models layer (which imports the package
    # root first) is enough for a handle; no entry point group exists.
    script = (
        "import importlib.metadata, sys\n"
        "assert not list(importlib.metadata.entry_points(group='kerasbert.backbone_sources'))\n"
        "from kerasbert.models import BertBackbone\n"
        "BertBackbone.from_preset('bert_tiny', vocabulary_size=50).save(sys.argv[1])\n"
        "loaded = BertBackbone.from_preset(sys.argv[1])\n"
        "print(type(loaded).__name__, loaded.vocabulary_size)\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "b.keras")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-2:] == ["BertBackbone", "50"]


def test_hub_snapshots_fetch_every_file_a_loader_reads():
    # A sentence-transformers repository as published: weights, tokenizer
    # and pooling files come down; pickles never do.
    import fnmatch

    from kerasbert.sources.handles import HF_PATTERNS

    def fetched(name):
        return any(fnmatch.fnmatch(name, pattern) for pattern in HF_PATTERNS)

    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "vocab.txt", "modules.json", "sentence_bert_config.json",
                 "1_Pooling/config.json"):
        assert fetched(name), name
    assert not fetched("pytorch_model.bin") and not fetched("2_Dense/pytorch_model.bin")
