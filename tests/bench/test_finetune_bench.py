"""bench/finetune_bench.py runs end to end (--quick: bert_tiny on the built-in
task, one search trial); accuracies and timings are never asserted."""

import math

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
