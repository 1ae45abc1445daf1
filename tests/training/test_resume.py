"""Step-exact resume: a run killed with SIGKILL and resumed ends with the
same weights, bit for bit, as an uninterrupted run (deterministic ops on
CPU, dropout on, so the RNG state must be restored too); a corrupt newest
checkpoint falls back to the previous one."""

import json
import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

import pretrain_data as pd
from kerasbert.tasks import BertPretrainer  # noqa: F401  (registers the classes for loading)

from slow_marks import slow_covered_by


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return pd.make_data(str(tmp_path_factory.mktemp("resume-data")))


def final_weights(run_dir):
    return keras.saving.load_model(os.path.join(run_dir, "pretrainer.keras")).get_weights()


def logged_steps(run_dir):
    path = os.path.join(run_dir, "history.jsonl")
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        lines = [line for line in f if line.endswith("\n")]
    return json.loads(lines[-1])["step"] if lines else 0


def args_for(data, run_dir, *extra):
    vocab, shards = data
    return pd.pretrain_args(vocab, shards, run_dir, "--deterministic", "--checkpoint-every", "5",
                            "--log-every", "1", *extra, steps=30)


# `kerasbert pretrain` that holds still once it has logged step KILL_AT (the
# row is written and flushed; it then waits for the test's SIGKILL), so the
# kill lands at the same step however fast or loaded the machine is (a run
# polled from outside could finish its last 17 steps between two polls).
KILL_AT = 13
STOPPING_CLI = f"""
import sys, time
from kerasbert import runs

append = runs.History.append

def append_then_wait(self, row):
    append(self, row)
    if row.get("step", 0) >= {KILL_AT} and "loss" in row:
        while True:
            time.sleep(60)

runs.History.append = append_then_wait
from kerasbert.cli import main
sys.exit(main(sys.argv[1:]))
"""


# 60 s: three fresh runs, killed at step 13 and resumed bit-identical to an uninterrupted
# one; the default suite SIGKILLs and resumes a console run and restores the input
# position from a checkpoint.
@slow_covered_by("tests/reliability/test_kills.py::test_kill_pretrain_then_resume",
                 "tests/training/test_checkpoints.py::test_input_position_restores_on_its_own")
def test_sigkill_then_resume_equals_uninterrupted_run(data, tmp_path):
    reference, killed = str(tmp_path / "reference"), str(tmp_path / "killed")
    result = pd.run_cli(args_for(data, reference))
    assert result.returncode == 0, result.stderr[-3000:]

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=pd.REPO)
    with open(tmp_path / "stderr.txt", "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", STOPPING_CLI, *args_for(data, killed)],
                                stdout=subprocess.DEVNULL, stderr=stderr, env=env, cwd=pd.REPO)
        deadline = time.time() + 300
        while logged_steps(killed) < KILL_AT and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        still_running = proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert still_running, (tmp_path / "stderr.txt").read_text()[-3000:]
    killed_at = logged_steps(killed)
    assert proc.returncode == -signal.SIGKILL and killed_at == KILL_AT, killed_at
    assert not os.path.exists(os.path.join(killed, "pretrainer.keras"))

    result = pd.run_cli(args_for(data, killed, "--resume"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Resumed from" in result.stdout
    assert "ckpt-10" in result.stdout  # checkpoints every 5 steps: 10 is the newest
    for a, b in zip(final_weights(reference), final_weights(killed)):
        np.testing.assert_array_equal(a, b)
    # The history is continuous: each step logged once, in order.
    with open(os.path.join(killed, "history.jsonl")) as f:
        assert [json.loads(line)["step"] for line in f] == list(range(1, 31))


# 38 s: two fresh runs around a damaged ckpt-4; the default suite falls back over every
# kind of damage in process and resumes a console run.
@slow_covered_by("tests/training/test_checkpoints.py::test_damaged_newest_checkpoint_falls_back_with_a_warning",
                 "tests/reliability/test_kills.py::test_kill_pretrain_then_resume")
def test_corrupt_newest_checkpoint_falls_back(data, tmp_path):
    run = str(tmp_path / "run")
    vocab, shards = data
    base = pd.pretrain_args(vocab, shards, run, "--checkpoint-every", "2", steps=4)
    result = pd.run_cli(base)
    assert result.returncode == 0, result.stderr[-3000:]
    newest = os.path.join(run, "checkpoints", "ckpt-4.data-00000-of-00001")
    with open(newest, "r+b") as f:
        f.seek(os.path.getsize(newest) // 2)
        f.write(b"\xff" * 64)
    result = pd.run_cli(pd.pretrain_args(vocab, shards, run, "--checkpoint-every", "2",
                                         "--resume", steps=6))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ckpt-4" in result.stderr and "falling back" in result.stderr
    assert "Resumed from" in result.stdout and "ckpt-2" in result.stdout
    with open(os.path.join(run, "history.jsonl")) as f:
        assert [json.loads(line)["step"] for line in f][-1] == 6
