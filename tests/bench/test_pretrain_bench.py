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
from slow_marks import slow_covered_by

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
@slow_covered_by("tests/bench/test_pretrain_bench.py::test_flops_formula",
                 "tests/bench/test_pretrain_bench.py::test_masked_positions_are_sorted_real_tokens",
                 "tests/training/test_pretrain_cli.py::test_run_writes_every_output")
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


# 35 s; the bfloat16 row (ours mixed_bfloat16, keras-hub float32). The
# default suite checks the flag, our model's policy and the logits check.
@slow_covered_by("tests/bench/test_pretrain_bench.py::test_ours_dtype_defaults_to_dtype_and_refuses_bad_policies",
                 "tests/bench/test_pretrain_bench.py::test_ours_built_under_its_own_policy_from_the_peer_weights",
                 "tests/bench/test_pretrain_bench.py::test_masked_positions_are_sorted_real_tokens")
def test_quick_run_ours_in_bfloat16_against_float32_peer(tmp_path):
    out = tmp_path / "pretrain_bf16.json"
    proc = _run_quick(tmp_path, "--ours-dtype", "mixed_bfloat16", "--json", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    payload = json.loads(out.read_text())
    meta = payload["meta"]
    assert meta["dtype_policy"] == {"ours": "mixed_bfloat16", "keras_hub": "float32"}
    assert payload["env"]["dtype_policy"] == "float32"
    assert payload["env"]["ours_dtype_policy"] == "mixed_bfloat16"
    # bfloat16 rounding: the loose check, and still a close match.
    assert meta["logits_tolerance"] >= 5e-2
    assert 0 < meta["logits_max_abs_diff"] <= meta["logits_tolerance"]
    rows = payload["rows"]
    assert [r["row"] for r in rows] == ROWS
    for row in rows:
        assert math.isfinite(row["ratio"]) and row["ratio"] > 0, row
        assert row["ratio"] == pytest.approx(
            row["ours_seq_per_s"] / row["keras_hub_seq_per_s"], rel=1e-6)

    printed = proc.stdout
    assert ("dtype policy: ours mixed_bfloat16, keras-hub float32 (keras-hub's "
            "BertMaskedLM fails under a mixed policy on TensorFlow") in printed
    assert "dtype=mixed_bfloat16(ours)/float32(keras-hub)" in printed
    for row in ROWS:
        assert f"\n{row} " in printed, row


def test_ours_dtype_defaults_to_dtype_and_refuses_bad_policies(bench, capsys):
    assert bench.parse_args([]).ours_dtype == "float32"
    args = bench.parse_args(["--dtype", "mixed_float16"])
    assert args.dtype == args.ours_dtype == "mixed_float16"
    args = bench.parse_args(["--ours-dtype", "mixed_bfloat16"])
    assert (args.dtype, args.ours_dtype) == ("float32", "mixed_bfloat16")
    for argv, flag in ((["--ours-dtype", "mixed_bf16"], "--ours-dtype"),
                       (["--dtype", "float33"], "--dtype")):
        with pytest.raises(SystemExit) as info:
            bench.parse_args(argv)
        assert info.value.code == 2, argv
        assert f"{flag} {argv[1]!r}" in capsys.readouterr().err


def test_ours_built_under_its_own_policy_from_the_peer_weights(bench):
    import keras
    import keras_hub

    OURS, PEER, QUICK_CONFIG = bench.OURS, bench.PEER, bench._common.QUICK_CONFIG
    keras.utils.set_random_seed(0)
    peer = keras_hub.models.BertMaskedLM(
        backbone=keras_hub.models.BertBackbone(**QUICK_CONFIG, dtype="float32"),
        preprocessor=None)
    policies = {OURS: keras.dtype_policies.get("mixed_bfloat16"),
                PEER: keras.dtype_policies.get("float32")}
    ours = bench.build_ours(peer, policies[OURS])
    assert keras.config.dtype_policy().name == "float32"  # restored
    assert ours.dtype_policy.name == "mixed_bfloat16"
    assert ours.backbone.dtype_policy.name == "mixed_bfloat16"
    assert ours.masked_lm_head.dtype_policy.name == "mixed_bfloat16"
    # Same float32 values as the peer's backbone.
    for a, b in zip(ours.backbone.get_weights(), bench.build_ours(peer).backbone.get_weights()):
        np.testing.assert_array_equal(a, b)

    x, ids, weights = bench.make_batch(2, 16, 4, QUICK_CONFIG["vocabulary_size"])
    data = {OURS: {"x": bench.ours_features(x, ids, weights)}, PEER: {"x": x}}
    diff, tol = bench.check_logits({OURS: ours, PEER: peer}, data, policies)
    assert tol >= 5e-2 and 0 < diff <= tol  # rounded, still the same function
    # A real mismatch still fails (main exits 2 on BenchError).
    ours.masked_lm_head.output_bias.assign(ours.masked_lm_head.output_bias + 1.0)
    with pytest.raises(bench.BenchError, match="logits differ"):
        bench.check_logits({OURS: ours, PEER: peer}, data, policies)
    # Both in float32: the tight check.
    policies[OURS] = policies[PEER]
    assert bench.logits_tolerance(policies, np.ones(3)) == 1e-4
    assert "fails under a mixed policy" in bench.dtype_line(
        {OURS: "mixed_bfloat16", PEER: "float32"}, "tensorflow")
    assert bench.dtype_line({OURS: "float32", PEER: "float32"}, "tensorflow") == (
        "dtype policy: ours float32, keras-hub float32")


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
