"""bench/load_bench.py runs end to end (--quick); timings never asserted."""

import math

import pytest

from bench_loader import load_bench


def test_quick_run_loads_both_sources_with_both_libraries(tmp_path):
    bench = load_bench("load_bench")
    results = bench.main(["--quick", "--json", str(tmp_path / "load.json")])
    assert set(results["sources"]) == {"keras_hub", "hf"}
    for row in results["sources"].values():
        assert row["file_mb"] > 0
        for contender in ("ours", "keras_hub"):
            assert math.isfinite(row[contender]["seconds"]) and row[contender]["seconds"] > 0
            assert row[contender]["rss_growth_mb"] >= 0
    assert (tmp_path / "load.json").exists()


@pytest.mark.slow
def test_quick_run_loads_the_published_checkpoint_too(published_minilm):
    bench = load_bench("load_bench")
    results = bench.main(["--quick", "--published-dir", str(published_minilm)])
    row = results["sources"]["published"]
    assert 80 < row["file_mb"] < 90  # all-MiniLM-L6-v2's 87 MB of float32
    for contender in ("ours", "keras_hub"):
        assert math.isfinite(row[contender]["seconds"]) and row[contender]["seconds"] > 0
