"""bench/load_bench.py runs end to end (--quick); timings never asserted."""

import math

from bench_loader import assert_loads_and_refuses_an_unknown_flag
from bench_loader import run_quick
from slow_marks import slow_covered_by


# About 50 s: each load in its own process, ours and keras-hub's; the
# default suite compares both loaders' outputs in process.
@slow_covered_by("tests/bench/test_load_bench.py::test_the_script_loads_and_refuses_an_unknown_flag",
                 "tests/convert/test_hf_checkpoint.py::test_same_outputs_as_keras_hubs_hugging_face_loader",
                 "tests/convert/test_keras_hub.py::test_from_keras_hub_dispatches_on_the_family")
def test_quick_run_loads_both_sources_with_both_libraries(tmp_path):
    results = run_quick("load_bench", "--json", str(tmp_path / "load.json"))
    assert set(results["sources"]) == {"keras_hub", "hf"}
    for row in results["sources"].values():
        assert row["file_mb"] > 0
        for contender in ("ours", "keras_hub"):
            assert math.isfinite(row[contender]["seconds"]) and row[contender]["seconds"] > 0
            assert row[contender]["rss_growth_mb"] >= 0
    assert (tmp_path / "load.json").exists()


@slow_covered_by(
    "tests/convert/test_published_checkpoint.py::test_outputs_equal_keras_hubs_loader_of_the_same_directory")
def test_quick_run_loads_the_published_checkpoint_too(published_minilm):
    results = run_quick("load_bench", "--published-dir", str(published_minilm))
    row = results["sources"]["published"]
    assert 80 < row["file_mb"] < 90  # all-MiniLM-L6-v2's 87 MB of float32
    for contender in ("ours", "keras_hub"):
        assert math.isfinite(row[contender]["seconds"]) and row[contender]["seconds"] > 0


def test_the_script_loads_and_refuses_an_unknown_flag(capsys):
    assert_loads_and_refuses_an_unknown_flag("load_bench", capsys)
