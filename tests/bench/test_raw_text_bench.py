"""bench/raw_text_bench.py runs end to end (--quick: bert_tiny, a few steps
each way); steps/s are recorded, never asserted."""

import math

from bench_loader import assert_loads_and_refuses_an_unknown_flag
from bench_loader import run_quick
from slow_marks import slow_covered_by


# About 40 s of timed training steps; the default suite checks that strings
# and features give the same batches, which is what the bench times.
@slow_covered_by("tests/bench/test_raw_text_bench.py::test_the_script_loads_and_refuses_an_unknown_flag",
                 "tests/tasks/test_raw_text_preprocessing.py::test_text_features_equal_the_converter",
                 "tests/tasks/test_raw_text_preprocessing.py::test_shuffled_order_equals_the_features_path")
def test_quick_run_times_strings_and_features(tmp_path):
    payload = run_quick("raw_text_bench", "--work-dir", str(tmp_path),
                        "--json", str(tmp_path / "raw_text.json"))
    [result] = payload["results"]
    assert result["size"] == "bert_tiny"
    rows = {row["contender"]: row for row in result["rows"]}
    assert {"strings", "features"} <= set(rows)
    for row in rows.values():
        assert math.isfinite(row["ratio"]) and row["ratio"] > 0
        assert row["steps_per_s"] > 0 and row["cpu_ms_per_step"] > 0
    assert rows["features"]["ratio"] == 1.0
    assert (tmp_path / "raw_text.json").exists()


def test_the_script_loads_and_refuses_an_unknown_flag(capsys):
    assert_loads_and_refuses_an_unknown_flag("raw_text_bench", capsys)
