"""`kerasbert pretrain` end to end: outputs, input checks, strategies,
accumulation, precisions, two-phase init and learning.

Runs that change process-wide TensorFlow state (logical devices, op
determinism, dtype policies) run in fresh processes.
"""

import json
import os

import keras
import numpy as np
import pytest

import pretrain_data as pd
from kerasbert.cli import main

from slow_marks import slow_covered_by


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return pd.make_data(str(tmp_path_factory.mktemp("pretrain-data")))


def cli_ok(args, **kwargs):
    result = pd.run_cli(args, **kwargs)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def test_run_writes_every_output(data, tmp_path):
    vocab, shards = data
    run = str(tmp_path / "run")
    assert main(pd.pretrain_args(vocab, shards, run, "--checkpoint-every", "3",
                                 "--log-every", "2", steps=6)) == 0
    for name in ("backbone.keras", "pretrainer.keras", "config.json", "history.jsonl",
                 "training_curve.png"):
        assert os.path.getsize(os.path.join(run, name)) > 0, name
    assert sorted(os.listdir(os.path.join(run, "checkpoints"))) == [
        "ckpt-3.data-00000-of-00001", "ckpt-3.index", "ckpt-3.manifest.json",
        "ckpt-6.data-00000-of-00001", "ckpt-6.index", "ckpt-6.manifest.json"]
    assert any(f.startswith("events.out.tfevents")
               for f in os.listdir(os.path.join(run, "logs", "train")))
    rows = pd.history(run)
    assert [r["step"] for r in rows] == [2, 4, 6]
    for row in rows:
        assert np.isfinite(row["loss"]) and 0 <= row["mlm_accuracy"] <= 1
        assert row["sequences_per_second"] > 0 and "sentence_accuracy" in row
    config = json.load(open(os.path.join(run, "config.json")))
    assert config["objectives"] == ["mlm", "nsp"]
    assert config["data"]["max_seq_length"] == 32
    assert config["backbone"]["num_layers"] == 1

    backbone = keras.saving.load_model(os.path.join(run, "backbone.keras"))
    ids = np.ones((2, 32), "int32")
    out = backbone({"input_word_ids": ids, "input_mask": ids, "input_type_ids": 0 * ids})
    assert out["sequence_output"].shape == (2, 32, 32)
    pretrainer = keras.saving.load_model(os.path.join(run, "pretrainer.keras"))
    np.testing.assert_array_equal(pretrainer.backbone.get_weights()[0],
                                  backbone.get_weights()[0])


def test_existing_run_needs_resume(data, tmp_path, capsys):
    vocab, shards = data
    run = str(tmp_path / "run")
    assert main(pd.pretrain_args(vocab, shards, run, steps=2)) == 0
    assert main(pd.pretrain_args(vocab, shards, run, steps=4)) == 2
    assert "pass --resume" in capsys.readouterr().err
    # --resume at the final step has nothing left to do and keeps the outputs.
    assert main(pd.pretrain_args(vocab, shards, run, "--resume", steps=2)) == 0


def test_refusals_leave_no_run_folder_and_the_run_untouched(data, tmp_path, capsys):
    """A usage error leaves no run folder (no empty checkpoints/ either);
    --resume with --steps below the run's step is refused, the run left as
    it was."""
    from reliability.console import tree

    vocab, shards = data
    refused = tmp_path / "refused"
    assert main(pd.pretrain_args(vocab, shards, str(refused), "--set", "vocabulary_size=5",
                                 steps=2)) == 2
    assert "vocabulary_size=5 differs from --vocab" in capsys.readouterr().err
    assert not refused.exists()
    run = str(tmp_path / "run")
    assert main(pd.pretrain_args(vocab, shards, run, "--checkpoint-every", "2", steps=2)) == 0
    before = tree(run)
    assert main(pd.pretrain_args(vocab, shards, run, "--resume", steps=1)) == 2
    assert "already at step 2, past --steps 1" in capsys.readouterr().err
    assert tree(run) == before


@pytest.mark.parametrize("problem, expected", [
    ("vocab", "different vocabulary"),
    ("positions", "has 16 positions"),
    ("seq_flag", "differs from the data's metadata.json"),
    ("batch", "--batch-size: must be at least 1"),
    ("data", "No files match"),
    ("preset", "bert_tinyy"),
])
def test_bad_input_exits_2(data, tmp_path, capsys, problem, expected):
    vocab, shards = data
    run = str(tmp_path / "run")
    args = pd.pretrain_args(vocab, shards, run, steps=2)
    if problem == "vocab":
        other = tmp_path / "vocab.txt"
        lines = open(vocab, encoding="utf-8").read().splitlines()
        other.write_text("\n".join(lines[:-1] + ["zzz"]) + "\n", encoding="utf-8")
        args[args.index(vocab)] = str(other)
    elif problem == "positions":
        args += ["--set", "max_sequence_length=16"]
    elif problem == "seq_flag":
        args += ["--max-seq-length", "64"]
    elif problem == "batch":
        args[args.index("--batch-size") + 1] = "0"
    elif problem == "data":
        args[args.index(shards)] = str(tmp_path / "nothing" / "*.tfrecord")
    elif problem == "preset":
        args[args.index("bert_tiny")] = "bert_tinyy"
    if problem == "batch":  # the parser's refusal: argparse exits
        with pytest.raises(SystemExit) as exited:
            main(args)
        assert exited.value.code == 2
    else:
        assert main(args) == 2
    assert expected in capsys.readouterr().err
    assert not os.path.exists(os.path.join(run, "backbone.keras"))


# 46 s: two fresh runs, one device and MirroredStrategy over 2 logical CPUs, with equal
# losses; the default suite trains multi-replica through two multi_worker processes.
@slow_covered_by("tests/training/test_finetune_cli.py::test_multi_worker_strategy_two_console_script_processes",
                 "tests/data/test_reader_interop.py::test_mirrored_strategy_per_replica_batches",
                 "tests/training/test_strategy_refusals.py::test_mirrored_needs_gpus_or_logical_cpus",
                 "tests/training/test_pretrain_cli.py::test_run_writes_every_output")
def test_mirrored_matches_single_device(data, tmp_path):
    """Same global batch on 1 device and on 2 logical CPUs (dropout off):
    the loss trajectories agree to float32 reduction-order noise."""
    vocab, shards = data
    losses = {}
    for name, extra in (("one", ["--strategy", "cpu"]),
                        ("two", ["--strategy", "mirrored", "--logical-cpus", "2"])):
        run = str(tmp_path / name)
        cli_ok(pd.pretrain_args(vocab, shards, run, "--set", "dropout=0.0", "--log-every", "1",
                                "--deterministic", *extra, steps=5))
        losses[name] = [r["loss"] for r in pd.history(run)]
        if name == "two":
            assert json.load(open(os.path.join(run, "config.json")))["strategy"]["replicas"] == 2
    np.testing.assert_allclose(losses["two"], losses["one"], rtol=1e-5)
    assert losses["one"][-1] < losses["one"][0]



# 37 s: two fresh CLI runs, accumulation 2 x 4 equal to a batch of 8; the default suite
# checks the same equivalence in a custom tf.function step and in fit.
@slow_covered_by("tests/optimizers/test_optimizers.py::test_accumulation_in_a_custom_tf_function_step",
                 "tests/optimizers/test_optimizers.py::test_accumulated_steps_equal_one_big_batch_in_fit",
                 "tests/training/test_pretrain_cli.py::test_run_writes_every_output")
def test_accumulation_equals_big_batch(data, tmp_path):
    """2 micro-batches of 4 = one batch of 8 (same input order, dropout off)."""
    vocab, shards = data
    losses = {}
    for name, batch, extra in (("big", 8, []), ("acc", 4, ["--accumulation-steps", "2"])):
        run = str(tmp_path / name)
        cli_ok(pd.pretrain_args(vocab, shards, run, "--set", "dropout=0.0", "--log-every", "1",
                                "--deterministic", *extra, steps=4, batch_size=batch))
        losses[name] = [r["loss"] for r in pd.history(run)]
    np.testing.assert_allclose(losses["acc"], losses["big"], rtol=1e-5)


# 25-36 s each: fresh CLI processes (bfloat16 with --jit-compile and LAMB); the default
# suite runs float16 in process and the bfloat16 XLA step.
@slow_covered_by(
    "tests/training/test_pretrain_cli.py::test_float16_in_process_scales_the_loss",
    "tests/training/test_tpu_paths.py::test_the_pretraining_step_compiles_whole_on_static_shapes_in_bfloat16",
    "tests/tasks/test_bert_pretrainer.py::TestBertPretrainer::test_mixed_precision_fit",
    "tests/optimizers/test_optimizers.py::test_weight_decay_skips_layer_norm_and_biases")
@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
def test_half_precision_runs_stay_finite(data, tmp_path, precision):
    vocab, shards = data
    run = str(tmp_path / precision)
    # bfloat16 also runs XLA and LAMB through the same loop.
    jit = ["--jit-compile", "--optimizer", "lamb"] if precision == "mixed_bfloat16" else []
    cli_ok(pd.pretrain_args(vocab, shards, run, "--precision", precision, "--log-every", "1",
                            *jit, steps=3))
    rows = pd.history(run)
    assert len(rows) == 3 and all(np.isfinite(r["loss"]) for r in rows)
    config = json.load(open(os.path.join(run, "config.json")))
    assert config["backbone"]["dtype"]["config"]["name"] == precision
    loss_scaled = config["optimizer"] == "LossScaleOptimizer"
    assert loss_scaled == (precision == "mixed_float16")


def test_float16_in_process_scales_the_loss(data, tmp_path):
    """--precision mixed_float16 in this process (the global dtype policy is
    reset after each test): the loop's loss-scaled steps stay finite."""
    vocab, shards = data
    run = str(tmp_path / "fp16")
    assert main(pd.pretrain_args(vocab, shards, run, "--precision", "mixed_float16",
                                 "--log-every", "1", steps=2)) == 0
    rows = pd.history(run)
    assert len(rows) == 2 and all(np.isfinite(r["loss"]) for r in rows)
    config = json.load(open(os.path.join(run, "config.json")))
    assert config["backbone"]["dtype"]["config"]["name"] == "mixed_float16"
    assert config["optimizer"] == "LossScaleOptimizer"


# 24 s: the same run in a fresh process (the interpreter's exit code 2).
@slow_covered_by("tests/training/test_pretrain_cli.py::test_a_non_finite_loss_stops_the_run_in_process")
def test_non_finite_loss_stops_with_step(data, tmp_path):
    vocab, shards = data
    run = str(tmp_path / "nan")
    result = pd.run_cli(pd.pretrain_args(vocab, shards, run, "--learning-rate", "1e30",
                                         "--clipnorm", "0", "--warmup-steps", "0", steps=50))
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Non-finite loss" in result.stderr and "at step" in result.stderr


def test_a_non_finite_loss_stops_the_run_in_process(data, tmp_path, capsys):
    vocab, shards = data
    assert main(pd.pretrain_args(vocab, shards, str(tmp_path / "nan"), "--learning-rate", "1e30",
                                 "--clipnorm", "0", "--warmup-steps", "0", steps=50)) == 2
    err = capsys.readouterr().err
    assert "Non-finite loss" in err and "at step" in err


def _assert_phase_two_starts_from_phase_one(phase1, phase2):
    """Run `phase2` (sequence length 64, a learning rate of 1e-9) holds run
    `phase1`'s backbone weights."""
    first = keras.saving.load_model(os.path.join(phase1, "backbone.keras")).get_weights()
    second = keras.saving.load_model(os.path.join(phase2, "backbone.keras")).get_weights()
    for a, b in zip(first, second):
        np.testing.assert_allclose(a, b, atol=1e-6)
    config = json.load(open(os.path.join(phase2, "config.json")))
    assert config["data"]["max_seq_length"] == 64


# 26 s: phase 1 of 3 steps, phase 2 in a fresh process; the default suite runs one
# step per phase in process.
@slow_covered_by("tests/training/test_pretrain_cli.py::test_phase_two_in_process_starts_from_phase_one")
def test_two_phase_init_from(data, tmp_path):
    """Phase 2 (sequence 64) starts from phase 1's (sequence 32) weights."""
    vocab, shards_128 = data
    _, shards_512 = pd.make_data(os.path.dirname(shards_128), sequence_length=64, predictions=8)
    phase1, phase2 = str(tmp_path / "phase1"), str(tmp_path / "phase2")
    assert main(pd.pretrain_args(vocab, shards_128, phase1, steps=3)) == 0
    result = cli_ok(pd.pretrain_args(vocab, shards_512, phase2, "--init-from", phase1,
                                     "--learning-rate", "1e-9", steps=1))
    assert "Initialised from" in result.stdout
    _assert_phase_two_starts_from_phase_one(phase1, phase2)


def test_phase_two_in_process_starts_from_phase_one(data, tmp_path, capsys):
    """One step per phase: `--init-from RUN` of a run at sequence length 32
    starts a run at 64 from its weights."""
    vocab, shards_32 = data
    _, shards_64 = pd.make_data(os.path.dirname(shards_32), sequence_length=64, predictions=8)
    phase1, phase2 = str(tmp_path / "phase1"), str(tmp_path / "phase2")
    assert main(pd.pretrain_args(vocab, shards_32, phase1, steps=1)) == 0
    capsys.readouterr()
    assert main(pd.pretrain_args(vocab, shards_64, phase2, "--init-from", phase1,
                                 "--learning-rate", "1e-9", steps=1)) == 0
    assert "Initialised from" in capsys.readouterr().out
    _assert_phase_two_starts_from_phase_one(phase1, phase2)


# 14 s: 300 steps of a 2-layer model take the masked-LM loss below 3.0; the default
# suite checks the run's outputs and that a TrainStep lowers the loss.
@slow_covered_by("tests/training/test_pretrain_cli.py::test_run_writes_every_output",
                 "tests/training/test_loop.py::test_unused_variables_are_left_alone_and_the_rest_train")
def test_mlm_loss_falls_on_tiny_corpus(data, tmp_path):
    """A 2-layer width-64 BERT on the synthetic corpus: the masked-LM loss
    starts near ln(vocabulary) (5.3) and falls below 3.0 within 300 steps
    (the corpus's own floor is about 1.2: verbs, objects and endings are
    drawn at random, so only part of each sentence is predictable)."""
    vocab, shards = data
    run = str(tmp_path / "learn")
    args = pd.pretrain_args(vocab, shards, run, "--set", "num_layers=2", "--set", "hidden_dim=64",
                            "--set", "intermediate_dim=128", "--learning-rate", "2e-3",
                            "--warmup-steps", "20", "--log-every", "25",
                            "--checkpoint-every", "1000", steps=300, batch_size=16)
    assert main(args) == 0
    rows = pd.history(run)
    vocab_size = len(open(vocab, encoding="utf-8").read().splitlines())
    print(f"pretrain CLI masked-LM loss {rows[0]['mlm_loss']:.3f} -> {rows[-1]['mlm_loss']:.3f}, "
          f"accuracy {rows[-1]['mlm_accuracy']:.3f}")
    assert rows[0]["mlm_loss"] > 0.6 * np.log(vocab_size)
    # Measured over 6 model seeds: final loss 2.64-2.75, accuracy 0.270-0.292
    # (the accuracy bound was 0.25, too close to that spread).
    assert rows[-1]["mlm_loss"] < 3.0, [round(r["mlm_loss"], 3) for r in rows]
    assert rows[-1]["mlm_accuracy"] > 0.2
