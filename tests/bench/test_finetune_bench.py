"""bench/finetune_bench.py runs end to end (--quick: bert_tiny on the built-in
task, one search trial); accuracies and timings are never asserted."""

import math

from bench_loader import assert_loads_and_refuses_an_unknown_flag
from bench_loader import run_quick
from slow_marks import slow_covered_by


# About 80 s: three fine-tuning runs and a search trial; the default suite
# runs the recipe's choice and the search around it.
@slow_covered_by(
    "tests/bench/test_finetune_bench.py::test_the_script_loads_and_refuses_an_unknown_flag",
    "tests/training/test_best_epoch.py::test_finetune_chooses_values_for_the_model_and_keeps_the_best_epoch",
    "tests/training/test_search_edge.py::test_a_best_rate_at_the_edge_runs_one_step_past_it")
def test_quick_run_fine_tunes_three_ways(tmp_path):
    [row] = run_quick("finetune_bench", "--json", str(tmp_path / "finetune.json"))["rows"]
    assert row["size"] == "bert_tiny" and row["task"] == "stdlib-area"
    for key in ("old", "default", "search"):
        assert 0.0 <= row[key] <= 1.0 and math.isfinite(row[f"{key}_seconds"])
    assert row["default_values"]["learning_rate"] == 1e-3 and row["search_trials"] == 1
    assert (tmp_path / "finetune.json").exists()


# The published checkpoint fine-tuned by the bench; the default suite loads
# it and checks the recipe's defaults for published checkpoints.
@slow_covered_by("tests/convert/test_published_checkpoint.py::test_the_published_directory_loads_as_published",
                 "tests/training/test_recipes.py::test_published_checkpoints_are_told_from_runs_and_presets")
def test_quick_published_section(published_minilm, tmp_path):
    """--published-only --quick: the real checkpoint, one search trial at
    its default's rate, which is also the default's score (the same run)."""
    results = run_quick("finetune_bench", "--published-only", "--published-dir", str(published_minilm))
    assert results["rows"] == []
    section = results["published"]
    assert (section["num_layers"], section["hidden_dim"]) == (6, 384)
    [row] = section["rows"]
    assert row["task"] == "stdlib-area" and row["search_trials"] == 1
    assert row["default"] == row["search"] and row["default_from"] == "search trial 0"
    assert row["optimum"]["position"] == "single"


def test_the_script_loads_and_refuses_an_unknown_flag(capsys):
    assert_loads_and_refuses_an_unknown_flag("finetune_bench", capsys)
