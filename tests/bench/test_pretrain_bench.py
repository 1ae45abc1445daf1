"""bench/pretrain_bench.py runs end to end (--quick, in a subprocess);
timings and ratios are never asserted."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from bench_loader import BENCH_DIR
from bench_loader import load_bench

ROWS = ["train jit=off", "TrainStep jit=off", "train jit=on", "TrainStep jit=on"]


@pytest.fixture(scope="module")
def bench():
    return load_bench("pretrain_bench")


def _run_quick(tmp_path, *extra):
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(
        [sys.executable, str(BENCH_DIR / "pretrain_bench.py"), "--quick", *extra],
        capture_output=True, text=True, env=env, timeout=600, cwd=str(tmp_path),
    )


# 44 s; `make bench` runs it for real. The default suite checks its FLOPs
# formula and masking, and pretrains through the CLI.
@pytest.mark.slow(covered_by=("tests/bench/test_pretrain_bench.py::test_flops_formula",
                              "tests/bench/test_pretrain_bench.py::test_masked_positions_are_sorted_real_tokens",
                              "tests/training/test_pretrain_cli.py::test_run_writes_every_output"))
def test_quick_run_produces_all_rows(tmp_path):
    out = tmp_path / "results" / "pretrain.json"
    proc = _run_quick(tmp_path, "--json", str(out), "--backend-note", "t",
                      "--peak-tflops", "1")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    payload = json.loads(out.read_text())
    rows = payload["rows"]
    assert [r["row"] for r in rows] == ROWS
    for row in rows:
        for key in ("ours_seq_per_s", "keras_hub_seq_per_s", "ratio",
                    "paired_ratio_min", "paired_ratio_max", "ours_tflops",
                    "keras_hub_tflops", "ours_mfu", "keras_hub_mfu"):
            assert math.isfinite(row[key]) and row[key] > 0, (key, row)
    meta = payload["meta"]
    # Same weights and head numerics: the logits agree before any timing.
    assert meta["logits_max_abs_diff"] <= 1e-4
    assert meta["predictions"] == 4 and meta["skipped_rows"] == []
    assert payload["env"]["backend"] == "tensorflow"
    assert payload["env"]["note"] == "t"
    assert [p.name for p in out.parent.iterdir()] == ["pretrain.json"]

    printed = proc.stdout
    assert "ours/keras-hub" in printed and "TFLOP/s" in printed
    for row in ROWS:
        assert f"\n{row} " in printed, row


def test_flops_formula(bench):
    mini = {"num_layers": 4, "hidden_dim": 256, "intermediate_dim": 1024,
            "vocabulary_size": 30522}
    L, H, F, V, T, P = 4, 256, 1024, 30522, 128, 20
    forward = (2 * L * (4 * H * H + 2 * H * F) * T + 4 * L * T * T * H
               + 2 * P * (H * H + H * V))
    assert bench.train_flops_per_sequence(mini, T, P) == 3 * forward
    assert round(3 * forward / 1e9, 3) == 3.563  # as the docstring says


def test_masked_positions_are_sorted_real_tokens(bench):
    x, ids, weights = bench.make_batch(8, 32, 5, 1000)
    positions = x["mask_positions"]
    assert positions.shape == ids.shape == weights.shape == (8, 5)
    assert (np.diff(positions, axis=1) > 0).all()  # sorted, distinct
    assert (positions >= 1).all()  # never [CLS]
    lengths = x["padding_mask"].sum(axis=1)
    assert (positions < lengths[:, None]).all()
    assert (np.take_along_axis(x["token_ids"], positions, 1) == 103).all()
    assert (ids > 0).all() and (weights == 1).all()


def test_bad_arguments_exit_nonzero(bench):
    for argv in (["--predictions", "0"], ["--quick", "--predictions", "16"],
                 ["--warmup", "0"], ["--jit", "maybe"]):
        with pytest.raises(SystemExit) as info:
            bench.parse_args(argv)
        assert info.value.code != 0, argv
