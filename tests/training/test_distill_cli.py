"""`kerasbert distill` end to end: a teacher from `kerasbert pretrain`, a
student from the distilbert_base preset (shrunk with --set), the run's
outputs, a frozen teacher and clear errors.

The command is driven through its own parser (`commands.register(..., "distill")`),
as `kerasbert distill` does; test_teacher_given_as_a_handle runs the installed
console script.
"""

import argparse
import json
import os

import keras
import numpy as np
import pytest

import pretrain_data as pd
from reliability.console import kerasbert
from reliability.console import ok
from kerasbert.cli import main
from kerasbert.cli import run_reporting_errors
from kerasbert.models.distil_bert import DistilBertBackbone
from kerasbert import commands

from slow_marks import slow_covered_by

STUDENT = ["--set", "num_layers=1", "--set", "hidden_dim=32", "--set", "num_heads=2",
           "--set", "intermediate_dim=64"]


def distill(args):
    """Parses and runs `kerasbert distill ARGS`; returns the exit code."""
    parser = argparse.ArgumentParser(prog="kerasbert")
    commands.register(parser.add_subparsers(), "distill")
    parsed = parser.parse_args(["distill", *args])
    return run_reporting_errors(parsed.func, parsed, "kerasbert distill")


@pytest.fixture(scope="module")
def teacher_run(tmp_path_factory):
    """(vocab, shards, run dir) of a 2-layer width-32 BERT pretrained a few steps."""
    root = tmp_path_factory.mktemp("distill")
    vocab, shards = pd.make_data(str(root / "data"))
    run = str(root / "teacher")
    assert main(pd.pretrain_args(vocab, shards, run, "--set", "num_layers=2",
                                 steps=4)) == 0
    return vocab, shards, run


def distill_args(teacher_run, out, *extra, steps=6, student=STUDENT):
    vocab, shards, run = teacher_run
    return ["--teacher", os.path.join(run, "backbone.keras"), "--preset", "distilbert_base",
            "--vocab", vocab, "--data", shards, "--output-dir", out, "--steps", str(steps),
            "--batch-size", "8", "--learning-rate", "1e-3", "--warmup-steps", "1",
            "--log-every", "3", "--no-progress", *student, *extra]


# 23 s (with the module's teacher run, which then moves to test_bad_input_exits_2): every
# output, the student reloaded in safe mode, the teacher untouched; the default suite
# distills from the same teacher and checks the student's initialisation and losses.
@slow_covered_by("tests/training/test_distill_cli.py::test_teacher_given_as_a_handle",
                 "tests/tasks/test_distiller.py::TestStudentInitialisation::test_every_other_layer_and_the_embeddings",
                 "tests/tasks/test_distiller.py::TestDistillerLosses::test_teacher_is_frozen_and_checks")
def test_distill_writes_a_reloadable_student(teacher_run, tmp_path, capsys):
    vocab, shards, run = teacher_run
    teacher_file = os.path.join(run, "backbone.keras")
    teacher_before = keras.saving.load_model(teacher_file).get_weights()
    out = str(tmp_path / "student")
    assert distill(distill_args(teacher_run, out)) == 0
    assert "teacher layers [0]" in capsys.readouterr().out
    for name in ("backbone.keras", "pretrainer.keras", "config.json", "history.jsonl",
                 "training_curve.png"):
        assert os.path.getsize(os.path.join(out, name)) > 0, name
    rows = [json.loads(line) for line in open(os.path.join(out, "history.jsonl"))]
    assert [r["step"] for r in rows] == [3, 6]
    for row in rows:
        for key in ("loss", "ce_loss", "mlm_loss", "cos_loss", "teacher_agreement"):
            assert np.isfinite(row[key]), key
    config = json.load(open(os.path.join(out, "config.json")))
    assert config["teacher_layers"] == [0]
    assert config["backbone_class"] == "DistilBertBackbone"
    assert config["backbone"]["max_sequence_length"] == 64  # the teacher's
    assert config["distill"]["temperature"] == 2.0
    assert (config["distill"]["alpha_ce"], config["distill"]["alpha_mlm"],
            config["distill"]["alpha_cos"]) == (5.0, 2.0, 1.0)

    student = keras.saving.load_model(os.path.join(out, "backbone.keras"), safe_mode=True)
    assert isinstance(student, DistilBertBackbone) and student.num_layers == 1
    ids = np.full((2, 16), 5, "int32")
    out_ = student({"input_word_ids": ids, "input_mask": np.ones_like(ids),
                    "input_type_ids": np.zeros_like(ids)})
    assert out_["sequence_output"].shape == (2, 16, 32)
    pretrainer = keras.saving.load_model(os.path.join(out, "pretrainer.keras"))
    np.testing.assert_array_equal(pretrainer.backbone.get_weights()[0],
                                  student.get_weights()[0])
    # The teacher's files are untouched and the student moved away from its
    # initial copy of the teacher's embeddings.
    for a, b in zip(teacher_before, keras.saving.load_model(teacher_file).get_weights()):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(student.token_embedding.embeddings.numpy(), teacher_before[0])


@pytest.mark.parametrize("problem, expected", [
    ("width", "hidden_dim 768, the teacher 32"),
    ("layers", "Pass layer_map"),
    ("no_head", "--teacher-pretrainer"),
    ("multi_worker", "MultiWorkerMirroredStrategy"),
])
def test_bad_input_exits_2(teacher_run, tmp_path, capsys, problem, expected):
    vocab, shards, run = teacher_run
    out = str(tmp_path / "student")
    args = distill_args(teacher_run, out, steps=1)
    if problem == "width":
        args = distill_args(teacher_run, out, steps=1, student=STUDENT[:2])
    elif problem == "layers":
        args += ["--set", "num_layers=2"]
    elif problem == "no_head":
        lone = tmp_path / "lone"
        lone.mkdir()
        model = keras.saving.load_model(os.path.join(run, "backbone.keras"))
        model.save(str(lone / "backbone.keras"))
        args[args.index("--teacher") + 1] = str(lone / "backbone.keras")
    elif problem == "multi_worker":
        args += ["--strategy", "multi_worker"]
    assert distill(args) == 2
    assert expected in capsys.readouterr().err
    assert not os.path.exists(os.path.join(out, "backbone.keras"))


# A fresh process distilling over 2 logical CPUs (MirroredStrategy); the default suite
# distills on one device and runs a multi-replica finetune across two processes.
@slow_covered_by("tests/training/test_distill_cli.py::test_teacher_given_as_a_handle",
                 "tests/training/test_finetune_cli.py::test_multi_worker_strategy_two_console_script_processes",
                 "tests/data/test_reader_interop.py::test_mirrored_strategy_per_replica_batches")
def test_mirrored_strategy_over_two_logical_cpus(teacher_run, tmp_path):
    """Teacher and student under MirroredStrategy (2 logical CPUs, a fresh
    process since the device split must precede TensorFlow's start)."""
    out = str(tmp_path / "mirrored")
    code = ("import sys\n"
            "from test_distill_cli import distill\n"
            "sys.exit(distill(sys.argv[1:]))\n")
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", code, *distill_args(teacher_run, out, "--strategy", "mirrored",
                                                   "--logical-cpus", "2", steps=3)],
        capture_output=True, text=True, cwd=pd.REPO,
        # tests/ too: this module imports the `reliability` helpers from there.
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=os.pathsep.join(
            [pd.REPO, os.path.dirname(os.path.dirname(__file__)), os.path.dirname(__file__)])))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    config = json.load(open(os.path.join(out, "config.json")))
    assert config["strategy"]["replicas"] == 2
    assert config["strategy"]["class"] == "MirroredStrategy"
    rows = [json.loads(line) for line in open(os.path.join(out, "history.jsonl"))]
    assert rows and all(np.isfinite(r["loss"]) for r in rows)


# The CLI's --precision for the student; the default suite checks the Distiller at both
# precisions (loss scaling under float16) and the CLI at float32.
@slow_covered_by("tests/tasks/test_distiller.py::TestDistillerLosses::test_half_precision_student",
                 "tests/training/test_distill_cli.py::test_teacher_given_as_a_handle")
@pytest.mark.parametrize("precision", ["mixed_float16", "mixed_bfloat16"])
def test_half_precision_student(teacher_run, tmp_path, precision):
    out = str(tmp_path / precision)
    assert distill(distill_args(teacher_run, out, "--precision", precision, steps=3)) == 0
    config = json.load(open(os.path.join(out, "config.json")))
    assert config["backbone"]["dtype"]["config"]["name"] == precision
    assert config["teacher"]["dtype"]["config"]["name"] == "float32"
    rows = [json.loads(line) for line in open(os.path.join(out, "history.jsonl"))]
    assert rows and all(np.isfinite(r["loss"]) for r in rows)
    assert keras.config.dtype_policy().name == "float32"  # the global policy is restored


def test_teacher_given_as_a_handle(teacher_run, tmp_path):
    """`--teacher RUN_DIR` (a handle), through the installed console script:
    the run's pretrainer.keras brings the masked-LM head. A directory
    without one is refused in one line (in this process)."""
    vocab, shards, run = teacher_run
    args = distill_args(teacher_run, "student", steps=2)
    args[args.index("--teacher") + 1] = run
    assert "teacher layers [0]" in ok(kerasbert("distill", *args, cwd=tmp_path))
    assert os.path.isfile(tmp_path / "student" / "backbone.keras")
    (tmp_path / "empty").mkdir()
    args = distill_args(teacher_run, str(tmp_path / "student2"), steps=2)
    args[args.index("--teacher") + 1] = str(tmp_path / "empty")
    assert distill(args) == 2
