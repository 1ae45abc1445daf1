"""TF Serving batching parameters from a measured throughput curve, and the
files `export` writes with them."""

import os
import re

import pytest

from kerasbert.serving import batching

CURVE = {1: 100.0, 2: 180.0, 4: 300.0, 8: 380.0, 16: 420.0, 32: 430.0, 64: 400.0}


def test_parameters_follow_the_curve():
    params = batching.batching_parameters(CURVE, best_threads=2)
    # 90% of the 430/s peak is 387/s: batch 16 is the first to reach it.
    assert params["max_batch_size"] == 16
    assert params["allowed_batch_sizes"] == [1, 2, 4, 8, 16]
    # A batch of 16 takes 16 / 420 s = 38.1 ms; a tenth of it is the wait.
    assert params["batch_timeout_micros"] == 3810
    assert params["max_enqueued_batches"] == 27  # ceil(1 s / 38.1 ms)
    assert params["num_batch_threads"] == 2


def test_odd_maximum_and_bad_curves():
    params = batching.batching_parameters({1: 10.0, 3: 29.0, 5: 30.0})
    assert params["max_batch_size"] == 3 and params["allowed_batch_sizes"] == [1, 2, 3]
    with pytest.raises(ValueError, match="positive rates"):
        batching.batching_parameters({})
    with pytest.raises(ValueError, match="positive rates"):
        batching.batching_parameters({1: 0.0})


def test_text_proto_is_batching_parameters_syntax():
    text = batching.to_text_proto(batching.batching_parameters(CURVE))
    wrapped = re.compile(r"^(max_batch_size|batch_timeout_micros|max_enqueued_batches|"
                         r"num_batch_threads) \{ value: \d+ \}$")
    repeated = re.compile(r"^allowed_batch_sizes: \d+$")
    lines = text.strip().splitlines()
    assert all(wrapped.match(line) or repeated.match(line) for line in lines), text
    assert sum(bool(repeated.match(line)) for line in lines) == 5


def _entry(name, layers, hidden, length, rate):
    return {"name": name, "num_layers": layers, "hidden_dim": hidden, "sequence_length": length,
            "throughput": {1: rate, 8: rate * 4}, "best_threads": 1}


MEASURED = {"tiny": _entry("bert_tiny", 2, 128, 128, 1000.0),
            "base": _entry("bert_base", 12, 768, 128, 20.0)}


def test_nearest_measured_model_by_work(tmp_path):
    from serving_fixtures import tiny_backbone

    small = tiny_backbone(50)  # 1 layer, hidden 16: nearest bert_tiny
    assert batching.nearest_measured(small, 32, MEASURED)["name"] == "bert_tiny"
    from kerasbert import models

    wide = models.BertBackbone(vocabulary_size=50, num_layers=8, num_heads=8, hidden_dim=512,
                               intermediate_dim=64, max_sequence_length=128)
    assert batching.nearest_measured(wide, 128, MEASURED)["name"] == "bert_base"
    assert batching.nearest_measured(small, 32, {}) is None


def test_export_writes_both_files_and_keeps_an_operators_file(tmp_path, monkeypatch):
    from serving_fixtures import make_finetuned_dir

    from kerasbert.serving.exporter import export_finetuned

    monkeypatch.setattr(batching, "MEASURED", MEASURED)
    ft = make_finetuned_dir(str(tmp_path / "ft"), "classification")
    alone = export_finetuned(ft, str(tmp_path / "alone" / "sentiment"))
    assert alone["batching_file"] is None  # no models.config beside: per model only
    assert os.listdir(tmp_path / "alone") == ["sentiment"]
    assert os.path.isfile(os.path.join(alone["path"], batching.PER_MODEL_FILENAME))

    models_root = tmp_path / "export"
    models_root.mkdir()
    (models_root / "models.config").write_text("model_config_list {}\n")
    first = export_finetuned(ft, str(models_root / "sentiment"))
    server_file = models_root / batching.FILENAME
    assert first["batching_file"] == str(server_file)
    per_model = os.path.join(first["path"], batching.PER_MODEL_FILENAME)
    assert open(per_model).read() == server_file.read_text()
    assert "bert_tiny" in server_file.read_text()
    assert "max_batch_size { value: 8 }" in server_file.read_text()

    server_file.write_text("max_batch_size { value: 3 }\n")  # the operator's edit
    second = export_finetuned(ft, str(models_root / "sentiment"))
    assert second["batching_file"] is None
    assert server_file.read_text() == "max_batch_size { value: 3 }\n"
    assert os.path.isfile(os.path.join(second["path"], batching.PER_MODEL_FILENAME))


def test_committed_measurements_give_valid_parameters():
    """Every committed entry (from bench/serving_bench.py) yields parameters."""
    assert batching.MEASURED, "bench/serving_bench.py's measurements are not committed"
    for entry in batching.MEASURED.values():
        params = batching.batching_parameters(entry["throughput"], entry["best_threads"])
        assert params["max_batch_size"] in entry["throughput"]
