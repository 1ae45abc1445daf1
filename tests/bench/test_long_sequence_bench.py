"""bench/long_sequence_bench.py: workers in-process (BigBird, full, Reformer),
the growth, depth and table logic on rows, a failure recorded instead of
stopping the run, and (slow) the whole --quick run with its subprocesses.
Timings and memory sizes are never asserted, only that they are measured."""

import json
import math

import pytest
from bench_loader import load_bench
from slow_marks import slow_covered_by


@pytest.fixture(scope="module")
def bench():
    return load_bench("long_sequence_bench")


def test_workers_measure_a_train_step_of_each_attention(bench):
    args = bench.parse_args(["--quick"])
    row = bench.worker(args, "bigbird", 64)
    assert row["block_sparse"] is True  # 64 > (5 + 2) * 8: the sparse path
    assert row["step_s"] > 0 and row["first_step_s"] > 0
    assert row["peak_rss_mb"] >= row["rss_after_build_mb"] > 0
    assert row["peak_rss_mb"] > 0 and all(math.isfinite(v) for v in row["losses"])
    full = bench.worker(args, "full", 64)
    assert full["block_sparse"] is False and full["params"] == row["params"]
    reformer = bench.worker(args, "reformer", 64, num_layers=2)
    assert reformer["num_layers"] == 2 and all(math.isfinite(v) for v in reformer["losses"])


def test_modernbert_rows_train_serve_and_check_padding(bench):
    """The three ModernBERT rows (query-chunked global layers: 64 tokens >
    the quick chunk of 32; plain; all local) train to the same first loss
    where they share weights, a forward-only row, and the padding check."""
    args = bench.parse_args(["--quick"])
    rows = {a: bench.worker(args, a, 64, num_layers=3)
            for a in ("modernbert", "modernbert_plain", "modernbert_local")}
    for row in rows.values():
        assert row["ok"] and row["step_s"] > 0 and row["peak_rss_mb"] > 0
        assert all(math.isfinite(v) for v in row["losses"])
    assert rows["modernbert"]["losses"][0] == pytest.approx(rows["modernbert_plain"]["losses"][0],
                                                            rel=1e-5)
    backbone, _ = bench.build_model(args, "modernbert_local", 64, 3)
    assert [b.attention.window for b in backbone.transformer_layers] == [64, 64, 64]
    serve = bench.worker(args, "modernbert", 64, num_layers=3, mode="serve")
    assert serve["mode"] == "serve" and serve["step_s"] > 0
    padding = bench.worker(args, "modernbert", 128, num_layers=1, mode="padding")
    ways = {r["way"]: r for r in padding["rows"]}
    assert list(ways) == ["max_length", "longest", "bucketed"]
    assert all(r["epoch_s"] > 0 and r["tokens"] >= padding["real_tokens"] for r in ways.values())
    assert ways["bucketed"]["tokens"] <= ways["max_length"]["tokens"] == 8 * 128


def test_modernbert_over_bigbird_ratios(bench):
    rows = [_row("bigbird", 8192, 100.0), _row("modernbert", 8192, 150.0),
            _row("modernbert_plain", 8192, 400.0), _row("full", 8192, 900.0),
            dict(_row("bigbird", 8192, 50.0), mode="serve"),
            dict(_row("modernbert", 8192, 40.0), mode="serve")]
    ratios = {(v["attention"], v["mode"]): v["memory"] for v in bench.vs_bigbird(rows)}
    assert ratios == pytest.approx({("modernbert", "train"): 1.5,
                                    ("modernbert_plain", "train"): 4.0,
                                    ("modernbert", "serve"): 0.8})


def test_reformer_buckets_follow_the_length_and_factorise(bench):
    assert bench.reformer_buckets(1024, 64) == 16
    assert bench.reformer_buckets(4096, 64) == 64
    assert bench.reformer_buckets(8192, 64) == [8, 16]
    assert bench.reformer_buckets(65536, 64) == [32, 32]
    assert bench.reformer_buckets(100, 64) == 2


def _row(attention, length, mb, layers=2, ok=True):
    row = {"attention": attention, "seq_length": length, "num_layers": layers, "ok": ok}
    if ok:
        row.update(step_s=0.01 * length, step_memory_mb=mb, peak_rss_mb=900.0 + mb)
    else:
        row.update(reason="over 20 GB", peak_rss_mb=20480.0)
    return row


def test_growth_depth_and_table(bench):
    lengths = [1024, 4096, 16384]
    rows = [_row("full", n, (n / 1024) ** 2 * 10) for n in lengths[:2]]
    rows.append(_row("full", 16384, None, ok=False))
    rows += [_row("bigbird", n, n / 1024 * 5) for n in lengths]
    rows += [_row("reformer", n, n / 1024 * 3) for n in lengths]
    rows += [_row("reformer", 16384, 50.0, layers=12), _row("bigbird", 16384, 480.0, layers=12),
             _row("full", 16384, None, layers=12, ok=False)]
    full = bench.growth(rows, "full", lengths)
    assert [(g["from"], g["to"], g["factor"]) for g in full] == [(1024, 4096, 16.0)]
    assert full[0]["exponent"] == pytest.approx(2.0)
    assert [g["exponent"] for g in bench.growth(rows, "reformer", lengths)] == \
        pytest.approx([1.0, 1.0])
    args = bench.parse_args(["--quick"])
    args.attentions = bench.ATTENTIONS
    ratios = bench.depth_ratios(rows, args, [2, 12], 16384)
    assert ratios == pytest.approx({"bigbird": 6.0, "reformer": 50.0 / 48.0})
    result = {"rows": rows, "seq_lengths": lengths, "depths": [2, 12], "depth_lengths": [16384],
              "attentions": list(bench.ATTENTIONS), "config_name": "t",
              "config": {"num_layers": 2, "hidden_dim": 8}, "memory_cap_gb": 20.0,
              "growth": {a: bench.growth(rows, a, lengths) for a in bench.ATTENTIONS},
              "depth_ratio": {16384: ratios},
              "env": {"backend": "b", "device": "d", "keras": "k", "keras_hub": "h",
                      "tensorflow": "t", "dtype_policy": "float32", "cpu_count": 2,
                      "python": "3", "loadavg_start": 1.0, "loadavg_end": 1.0}}
    result["reformer_verdicts"] = bench.reformer_verdicts(result)
    assert result["reformer_verdicts"] == {"length": "linear",
                                           "depth": "flat at 16384 tokens (x1.04)"}
    table = bench.format_table(result)
    line_16k = next(ln for ln in table.splitlines() if ln.strip().startswith("16384"))
    assert "FAILED" in line_16k
    assert "full at 16384 tokens, 2 layers: FAILED (over 20 GB)" in table
    assert "reformer step memory 2->12 layers at 16384 tokens: x1.04" in table
    assert "reformer: memory linear in length" in table


def test_a_worker_over_the_memory_cap_is_recorded_as_failed(bench):
    # A cap below what importing TensorFlow takes: the worker is stopped.
    args = bench.parse_args(["--quick", "--memory-cap-gb", "0.05"])
    row = bench.run_worker(args, "reformer", 64, 1)
    assert row["ok"] is False and row["reason"] == "over 0.05 GB"


@pytest.mark.parametrize("argv, message", [
    (["--seq-lengths", "512,1024"], r"\[512\]: BigBird uses full attention up to .* = 704"),
    (["--seq-lengths", "a,b"], "give integers"),
    (["--quick", "--hidden-dim", "15"], "not divisible by --num-heads 2"),
])
def test_bad_sizes_are_clear_errors(bench, argv, message):
    with pytest.raises(bench.BenchError, match=message):
        bench.main(argv)


@pytest.mark.parametrize("argv", [["--steps", "0"], ["--attentions", "dense"],
                                  ["--sweeps", "width"]])
def test_bad_options_exit_nonzero(bench, argv):
    with pytest.raises(SystemExit) as info:
        bench.parse_args(argv)
    assert info.value.code != 0


# Nine worker processes; the default suite runs the workers' step in process.
@slow_covered_by("tests/bench/test_long_sequence_bench.py::test_workers_measure_a_train_step_of_each_attention",
                 "tests/bench/test_long_sequence_bench.py::test_growth_depth_and_table")
def test_quick_run_end_to_end(bench, tmp_path, capsys):
    # Nine workers, each a fresh Python importing TensorFlow: ~1 min.
    out = tmp_path / "r" / "long.json"
    plot = tmp_path / "long.png"
    result = bench.main(["--quick", "--json", str(out), "--plot", str(plot),
                         "--backend-note", "t"])
    assert {(r["attention"], r["seq_length"], r["num_layers"]) for r in result["rows"]} == {
        (a, n, 1) for a in bench.DEFAULT_ATTENTIONS for n in (64, 128)} | {
        (a, 128, 2) for a in bench.DEFAULT_ATTENTIONS}
    assert all(r["ok"] and r["step_s"] > 0 for r in result["rows"])
    assert all(r["block_sparse"] == (r["attention"] == "bigbird") for r in result["rows"])
    assert [g["from"] for g in result["growth"]["reformer"]] == [64]
    assert json.loads(out.read_text())["env"]["note"] == "t"
    assert [p.name for p in out.parent.iterdir()] == ["long.json"]
    assert plot.stat().st_size > 1000
    printed = capsys.readouterr().out
    assert "reformer step memory by length: 64->128" in printed
    assert "By depth (128 tokens)" in printed
