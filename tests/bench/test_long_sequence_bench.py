"""bench/long_sequence_bench.py: one worker in-process, the table and growth
logic on rows, and (slow) the whole --quick run with its subprocesses.
Timings and memory sizes are never asserted, only that they are measured."""

import json
import math

import pytest
from bench_loader import load_bench


@pytest.fixture(scope="module")
def bench():
    return load_bench("long_sequence_bench")


def test_one_worker_measures_a_block_sparse_train_step(bench):
    args = bench.parse_args(["--quick"])
    row = bench.worker(args, "bigbird", 64)
    assert row["block_sparse"] is True  # 64 > (5 + 2) * 8: the sparse path
    assert row["step_s"] > 0 and row["first_step_s"] > 0
    assert row["peak_rss_mb"] >= row["rss_after_build_mb"] > 0
    assert row["peak_rss_mb"] > 0 and all(math.isfinite(v) for v in row["losses"])
    full = bench.worker(args, "full", 64)
    assert full["block_sparse"] is False and full["params"] == row["params"]


def _row(attention, length, mb):
    return {"attention": attention, "seq_length": length, "step_s": 0.01 * length,
            "step_memory_mb": mb, "peak_rss_mb": 900.0 + mb}


def test_growth_per_doubling_and_table(bench):
    lengths = [1024, 2048, 4096]
    rows = [_row("full", n, (n / 1024) ** 2 * 10) for n in lengths]
    rows += [_row("bigbird", n, n / 1024 * 5) for n in lengths]
    assert [g["factor"] for g in bench.growth(rows, "full", lengths)] == [4.0, 4.0]
    assert [g["factor"] for g in bench.growth(rows, "bigbird", lengths)] == [2.0, 2.0]
    result = {"rows": rows, "seq_lengths": lengths, "config_name": "t", "config": {"x": 1},
              "growth": {a: bench.growth(rows, a, lengths) for a in bench.ATTENTIONS},
              "bigbird_memory": "linear",
              "env": {"backend": "b", "device": "d", "keras": "k", "keras_hub": "h",
                      "tensorflow": "t", "dtype_policy": "float32", "cpu_count": 2,
                      "python": "3", "loadavg_start": 1.0, "loadavg_end": 1.0}}
    table = bench.format_table(result)
    assert "bigbird step memory growth: 1024->2048 x2.00, 2048->4096 x2.00" in table
    assert "full step memory growth: 1024->2048 x4.00" in table
    line_4096 = next(ln for ln in table.splitlines() if ln.strip().startswith("4096"))
    assert "8.00x" in line_4096  # full 160 MB / bigbird 20 MB


@pytest.mark.parametrize("argv, message", [
    (["--seq-lengths", "512,1024"], r"\[512\]: BigBird uses full attention up to .* = 704"),
    (["--seq-lengths", "a,b"], "give integers"),
    (["--quick", "--hidden-dim", "15"], "not divisible by --num-heads 2"),
])
def test_bad_sizes_are_clear_errors(bench, argv, message):
    with pytest.raises(bench.BenchError, match=message):
        bench.main(argv)


def test_bad_counts_exit_nonzero(bench):
    with pytest.raises(SystemExit) as info:
        bench.parse_args(["--steps", "0"])
    assert info.value.code != 0


@pytest.mark.slow
def test_quick_run_end_to_end(bench, tmp_path, capsys):
    # Four workers, each a fresh Python importing TensorFlow: ~1 min.
    out = tmp_path / "r" / "long.json"
    result = bench.main(["--quick", "--json", str(out), "--backend-note", "t"])
    assert [(r["attention"], r["seq_length"]) for r in result["rows"]] == [
        ("full", 64), ("bigbird", 64), ("full", 128), ("bigbird", 128)]
    assert all(r["block_sparse"] == (r["attention"] == "bigbird") for r in result["rows"])
    assert all(r["step_s"] > 0 for r in result["rows"])
    assert [g["from"] for g in result["growth"]["bigbird"]] == [64]
    assert json.loads(out.read_text())["env"]["note"] == "t"
    assert [p.name for p in out.parent.iterdir()] == ["long.json"]
    printed = capsys.readouterr().out
    assert "bigbird step memory growth: 64->128" in printed and "full/bigbird" in printed
