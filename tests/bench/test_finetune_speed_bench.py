"""bench/finetune_speed_bench.py runs end to end (--quick, in a subprocess,
on the packaged published checkpoint); timings and ratios are never
asserted."""

import json
import os
import subprocess
import sys

import pytest
from bench_loader import BENCH_DIR
from bench_loader import load_bench
from slow_marks import slow_covered_by


def test_rows_and_their_settings():
    bench = load_bench("finetune_speed_bench")
    assert set(bench.OURS) | {"keras_hub_512", "keras_hub_128"} == set(bench.ROWS)
    assert set(bench.ACCURACY_ROWS) <= set(bench.OURS)
    for row, twin in bench.TWINS.items():  # a bfloat16 row and its float32 twin differ in dtype only
        assert bench.OURS[row][:2] == bench.OURS[twin][:2] and bench.OURS[twin][2] is None
    args = bench.parse_args(["--quick", "--rows", "longest,bf16"])
    assert args.rows == ["longest", "bf16"] and args.settings["steps"] == 3
    with pytest.raises(bench._common.BenchError, match="unknown"):
        bench.parse_args(["--rows", "longest,fast"])


# About 4 minutes on 2 cores (eight fine-tuned MiniLM models); `make bench` runs it
# for real. The default suite checks what its rows compare: the same losses at
# every padding, bfloat16 exports against float32 ones, the flags of finetune.
@slow_covered_by("tests/tasks/test_length_aware_tasks.py::test_same_losses_metrics_and_predictions_as_fixed_padding",
                 "tests/serving/test_bfloat16_export.py::test_bfloat16_export_agrees_with_float32",
                 "tests/training/test_finetune_cli.py::test_padding_and_precision_flags")
def test_quick_run_produces_every_row(tmp_path, published_minilm):
    checkpoint = published_minilm
    out = tmp_path / "speed.json"
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run([sys.executable, str(BENCH_DIR / "finetune_speed_bench.py"), "--quick",
                           "--published-dir", str(checkpoint), "--json", str(out), "--predict"],
                          capture_output=True, text=True, env=env, timeout=1500, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    # (The results JSON is written with sorted keys.)
    assert sorted(result["speed"]) == sorted(load_bench("finetune_speed_bench").ROWS)
    for row, values in result["speed"].items():
        assert values["examples_per_s"] > 0, row
    assert set(result["accuracy"]["fine_tuned"]) == {"fixed128", "longest", "bucketed", "bf16",
                                                     "bucketed_bf16"}
    assert 0 <= result["accuracy"]["export"]["same_label"] <= 1
    assert set(result["predict"]) == {"fixed128", "by_characters", "by_pieces"}
    for name, values in result["predict"].items():
        assert values["texts_per_s"] > 0 and values["max_abs_vs_fixed128"] < 1e-4, name
