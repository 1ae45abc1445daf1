"""bench/finetune_bench.py runs end to end (--quick: bert_tiny on the built-in
task, one search trial); accuracies and timings are never asserted."""

import math

import pytest

from bench_loader import load_bench


def test_quick_run_fine_tunes_three_ways(tmp_path):
    bench = load_bench("finetune_bench")
    results = bench.main(["--quick", "--json", str(tmp_path / "finetune.json")])
    [row] = results["rows"]
    assert row["size"] == "bert_tiny" and row["task"] == "stdlib-area"
    for key in ("old", "default", "search"):
        assert 0.0 <= row[key] <= 1.0 and math.isfinite(row[f"{key}_seconds"])
    assert row["default_values"]["learning_rate"] == 1e-3 and row["search_trials"] == 1
    assert (tmp_path / "finetune.json").exists()


@pytest.mark.slow
def test_quick_published_section(published_minilm, tmp_path):
    """--published-only --quick: the real checkpoint, one search trial at
    its default's rate, which is also the default's score (the same run)."""
    bench = load_bench("finetune_bench")
    results = bench.main(["--quick", "--published-only", "--published-dir", str(published_minilm)])
    assert results["rows"] == []
    section = results["published"]
    assert (section["num_layers"], section["hidden_dim"]) == (6, 384)
    [row] = section["rows"]
    assert row["task"] == "stdlib-area" and row["search_trials"] == 1
    assert row["default"] == row["search"] and row["default_from"] == "search trial 0"
    assert row["optimum"]["position"] == "single"
