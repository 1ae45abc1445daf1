"""bench/accelerator_check.py: `--smoke` end to end in a fresh process under
KERAS_BACKEND=jax with TensorFlow, tensorflow-text and keras-hub hidden (as
on a GPU machine with only JAX and Keras), and its plain-Python parts
(FLOPs, peaks, the batch search, the budget) in process. Timings are never
asserted."""

import json
import os
import subprocess
import sys

import pytest
from bench_loader import BENCH_DIR
from bench_loader import load_bench

from kerasbert.testing.without_tensorflow import HIDE_TENSORFLOW

RUN_HIDDEN = HIDE_TENSORFLOW + """
import runpy
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.fixture(scope="module")
def check():
    return load_bench("accelerator_check")


def test_smoke_runs_every_section_without_tensorflow(tmp_path):
    out = tmp_path / "results" / "smoke.json"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "XLA_FLAGS")}
    env.update(KERAS_BACKEND="jax")
    done = subprocess.run(
        [sys.executable, "-c", RUN_HIDDEN, str(BENCH_DIR / "accelerator_check.py"),
         "--smoke", "--out", str(out), "--peak-tflops", "0.01"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert [p.name for p in out.parent.iterdir()] == ["smoke.json"]  # no temporary left

    env_ = result["env"]
    assert env_["backend"] == "jax" and env_["device_platform"] == "cpu"
    assert not env_["tensorflow_imported"] and not env_["keras_hub_imported"]
    assert "xla_backend_optimization_level=0" in env_["xla_flags"]
    assert result["smoke"] and result["skipped"] == []

    train = result["train"]
    assert [r["precision"] for r in train] == ["mixed_bfloat16", "float32"]
    for row in train:
        assert row["finite"] and row["steps_per_s"] > 0 and 0 < row["mfu"], row
        assert row["model_tflop_per_step"] > 0 and row["xla_tflop_per_step"] > 0, row
    (equality,) = result["equality"]
    assert equality["equal"] and equality["max_relative_difference"] <= equality["rtol"]
    assert [r["batch"] for r in result["serving"]] == [1, 32]
    assert all(r["p50_ms"] > 0 for r in result["serving"])
    assert [r["task"] for r in result["tasks"]] == [
        "TextClassifier", "TokenClassifier", "QuestionAnswerer", "MultipleChoice"]
    assert all(r["finite"] and r["mfu"] > 0 for r in result["tasks"])
    (search,) = result["max_batch"]
    assert search["largest_fit"] == 8 and search["stopped_by"] == "cap"
    assert result["goal"]["target"] == 0.5 and result["goal"]["best_measured"] is None
    assert "6*N*tokens" in result["flops_formula"]
    assert "total" in done.stdout and "goal:" in done.stdout


def test_bert_base_flops_match_the_textbook_count(check):
    config = {"num_layers": 12, "hidden_dim": 768, "intermediate_dim": 3072,
              "vocabulary_size": 30522}
    batch, seq, predictions = 32, 128, 20
    dense = check.pretraining_flops(config, batch, seq, predictions, sparse_last_layer=False)
    weights = 12 * (4 * 768**2 + 2 * 768 * 3072)  # encoder matmul weights, ~85M
    heads = 6 * batch * (predictions * (768**2 + 768 * 30522) + 768**2 + 2 * 768)
    textbook = 6 * weights * batch * seq + 12 * 12 * seq * 768 * batch * seq + heads
    assert dense == textbook
    sparse = check.pretraining_flops(config, batch, seq, predictions)
    last_layer = 3 * batch * (check.encoder_flops(config, seq)
                              - check.encoder_flops(config, seq, 1 + predictions))
    assert dense - sparse == last_layer > 0
    # A classifier step: the encoder, the pooler and a 2-way dense head.
    assert check.task_flops("TextClassifier", config, 8, seq, 2) == 3 * 8 * (
        check.encoder_flops(config, seq) + 2 * 768**2 + 2 * 768 * 2)


@pytest.mark.parametrize("kind, precision, peak", [
    ("NVIDIA H100 80GB HBM3", "mixed_bfloat16", 989.0),
    ("NVIDIA H100 80GB HBM3", "float32", 67.0),
    ("NVIDIA H200", "mixed_bfloat16", 989.0),
    ("NVIDIA H200", "float32", 67.0),
    ("NVIDIA H100 PCIe", "mixed_bfloat16", 756.0),
    ("cpu", "mixed_bfloat16", None),
])
def test_peaks_by_device_name(check, kind, precision, peak):
    assert check.peak_tflops(kind, precision) == peak


def test_mfu_and_tf32(check):
    assert check.peak_tflops("NVIDIA H100 80GB HBM3", "float32", fp32_matmul="tf32") == 494.0
    assert check.mfu(989e12 / 2, 1.0, 989.0) == pytest.approx(0.5)
    assert check.mfu(1e12, 1.0, None) is None


def test_largest_batch_doubles_until_out_of_memory(check):
    def fake(batch):
        if batch >= 64:
            raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate")
        return {"steps_per_s": 1.0}

    found = check.largest_batch(fake, 8, 1024)
    assert (found["largest_fit"], found["first_failed"], found["stopped_by"]) == (32, 64,
                                                                                 "out_of_memory")
    assert [t["batch"] for t in found["tries"]] == [8, 16, 32, 64]
    capped = check.largest_batch(fake, 8, 16)
    assert (capped["largest_fit"], capped["stopped_by"]) == (16, "cap")
    calls = iter([True, False])
    stopped = check.largest_batch(fake, 8, 1024, allows=lambda: next(calls))
    assert (stopped["largest_fit"], stopped["stopped_by"]) == (8, "budget")
    with pytest.raises(ValueError):
        check.largest_batch(lambda b: (_ for _ in ()).throw(ValueError("a bug")), 8, 16)


def test_budget_counts_from_the_start(check):
    now = [100.0]
    budget = check.Budget(60, clock=lambda: now[0])
    now[0] = 130.0
    assert budget.left() == 30 and budget.allows(29) and not budget.allows(30)


def test_bad_flags(check):
    with pytest.raises(SystemExit):
        check.parse_args(["--sections", "train,nope"])
    assert check.main(["--smoke", "--models", "bert_huge", "--sections", ""]) == 2
