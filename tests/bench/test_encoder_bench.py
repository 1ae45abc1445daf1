"""bench/encoder_bench.py runs end to end (tiny config); timings never asserted."""

import json
import math

import pytest
from bench_loader import load_bench


@pytest.fixture(scope="module")
def bench():
    return load_bench("encoder_bench")


def test_quick_run_produces_all_rows(bench, tmp_path, capsys):
    out = tmp_path / "results" / "bench.json"
    payload = bench.main(["--quick", "--json", str(out), "--backend-note", "t"])

    rows = payload["rows"]
    assert [r["row"] for r in rows] == [
        "forward jit=off",
        "forward jit=on",
        "train jit=off",
        "train jit=on",
    ]
    for row in rows:
        assert row["ours_seq_per_s"] > 0, row
        assert row["keras_hub_seq_per_s"] > 0, row
        assert math.isfinite(row["ratio"]) and row["ratio"] > 0, row
    # Same weights: outputs agree before anything is timed.
    for name, diff in payload["meta"]["output_max_abs_diff"].items():
        assert diff <= 1e-3, (name, diff)
    assert payload["env"]["backend"] and payload["env"]["keras"]
    assert payload["env"]["note"] == "t"

    # The JSON file holds the same results, and no temp file is left behind.
    assert json.loads(out.read_text())["rows"][0]["row"] == "forward jit=off"
    assert [p.name for p in out.parent.iterdir()] == ["bench.json"]

    printed = capsys.readouterr().out
    assert "ours/keras-hub" in printed
    for row in rows:
        assert row["row"] in printed


def test_unknown_preset_is_a_clear_error(bench):
    with pytest.raises(bench.BenchError, match="Unknown preset 'bert_nope'"):
        bench.main(["--preset", "bert_nope"])


def test_sequence_longer_than_model_is_a_clear_error(bench):
    with pytest.raises(bench.BenchError, match="--seq-length 999 exceeds"):
        bench.main(["--quick", "--seq-length", "999"])


def test_bad_counts_exit_nonzero(bench):
    with pytest.raises(SystemExit) as info:
        bench.parse_args(["--repeats", "0"])
    assert info.value.code != 0
