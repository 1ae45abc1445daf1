"""bench/data_bench.py runs end to end (--quick); timings and ratios never asserted."""

import math

import pytest
from bench_loader import assert_rows_saved_and_printed
from bench_loader import load_bench
from slow_marks import slow_covered_by


@pytest.fixture(scope="module")
def bench():
    return load_bench("data_bench")


def _positive(value):
    return value is not None and math.isfinite(value) and value > 0


# About 2 minutes; `make bench` runs it for real. The default suite checks
# the bench's corpus slicing and the writers it times.
@slow_covered_by("tests/bench/test_data_bench.py::test_corpus_slice_ends_at_a_document_boundary",
                 "tests/data/test_writer.py::test_deterministic_for_a_seed_and_across_workers")
def test_quick_run_produces_all_rows(bench, tmp_path, capsys):
    out = tmp_path / "results" / "data.json"
    payload = bench.main(["--quick", "--work-dir", str(tmp_path / "work"), "--json", str(out),
                          "--note", "t"])

    rows = payload["rows"]
    names = [r["row"] for r in rows]
    expected_prefixes = [
        "input MB/s", "input MB/s", "peak RSS", "peak RSS", "peak RSS growth", "peak PSS",
        "peak PSS", "peak PSS growth", "input MB/s", "peak RSS", "peak PSS", "examples/s",
        "examples/s, ours dynamic", "MB/s",
        # Beam (direct) against the local writer, at S and 4S, then growth,
        # per-core rate and start-up.
        "input MB/s", "peak RSS per worker", "peak RSS of the driver", "peak PSS, all",
        "input MB/s", "peak RSS per worker", "peak RSS of the driver", "peak PSS, all",
        "peak RSS per worker growth", "steady input MB/s per core", "fixed start-up cost",
    ]
    assert len(rows) == len(expected_prefixes), names
    for row, prefix in zip(rows, expected_prefixes):
        assert row["row"].startswith(prefix), (row["row"], prefix)
        if row["row"].startswith("fixed start-up"):  # may be 0 at these sizes
            assert row["ours"] is not None and row["ours"] >= 0, row
            continue
        assert _positive(row["ours"]), row
    # Every row but the whole-corpus writer rows (ours only) has a peer and a ratio.
    for row in rows:
        if row["section"] == "writer" and row["peer"] is None:
            assert row["row"].startswith(("input MB/s", "peak RSS", "peak PSS")), row
            continue
        if row["row"].startswith("fixed start-up"):
            continue
        assert _positive(row["peer"]), row
        assert _positive(row["ratio"]), row
    assert [r["section"] for r in rows].count("reader") == 2
    assert [r["section"] for r in rows].count("tokenizer") == 1

    # Both writers wrote instances; the tokenizers agreed on every line.
    writer = payload["results"]["writer"]
    for who, key in (("ours", "S"), ("ours", "4S"), ("ours", "full"), ("peer", "S"),
                     ("peer", "4S")):
        assert writer[who][key]["instances"] > 0, (who, key)
    beam = payload["results"]["beam"]
    for key in ("S", "4S"):  # Both runners wrote the same number of instances.
        assert beam["runs"][f"direct-{key}"]["instances"] == beam["runs"][f"local-{key}"][
            "instances"] > 0
        assert beam["runs"][f"direct-{key}"]["workers_seen"] >= 2
    assert all(h > 0 for h in beam["extrapolated_16gb_hours"].values())
    tok = payload["results"]["tokenizer"]
    assert tok["lines"] > 0 and tok["identical"] == tok["lines"]
    assert payload["meta"]["corpus"]["multilingual_documents"] > 0
    assert payload["env"]["cpu_count"] and payload["env"]["tensorflow"]
    assert payload["env"]["note"] == "t"

    assert_rows_saved_and_printed(out, rows, capsys.readouterr().out, "ours/peer")


def test_slices_must_fit_in_the_corpus(bench):
    with pytest.raises(SystemExit) as info:
        bench.parse_args(["--corpus-mb", "4", "--slice-mb", "2"])
    assert info.value.code != 0


def test_corpus_slice_ends_at_a_document_boundary(bench, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b.\nc d.\n\ne f.\n\ng h.\n\n", encoding="utf-8")
    out = tmp_path / "s.txt"
    size = bench.write_slice(corpus, 6 / 2**20, out)
    assert out.read_text(encoding="utf-8") == "a b.\nc d.\n\n"
    assert size == len("a b.\nc d.\n\n")
