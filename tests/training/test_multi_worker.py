"""MultiWorkerMirroredStrategy: two worker processes on 127.0.0.1 train
one model together through the custom loop; only the chief writes to the
run directory."""

import json
import os
import sys

import pretrain_data as pd
import pytest

from kerasbert.testing.workers import run_workers as launch

from slow_marks import slow_covered_by


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return pd.make_data(str(tmp_path_factory.mktemp("mw-data")))


def run_workers(args):
    """One `kerasbert pretrain` process per worker on fresh ports
    (`kerasbert.testing.workers.run_workers`); their stdouts."""
    return launch([sys.executable, "-m", "kerasbert", *args], pd.REPO,
                  env={"PYTHONPATH": pd.REPO})


# 48 s: pretrain's own loop over two worker processes, then both resume; the default
# suite runs two multi_worker finetune console scripts and a SIGKILLed pretrain resumed.
@slow_covered_by("tests/training/test_finetune_cli.py::test_multi_worker_strategy_two_console_script_processes",
                 "tests/reliability/test_kills.py::test_kill_pretrain_then_resume",
                 "tests/training/test_strategy_refusals.py::test_a_whole_tf_config_passes")
def test_two_workers_train_and_only_chief_writes(data, tmp_path):
    vocab, shards = data
    run = str(tmp_path / "run")
    args = pd.pretrain_args(vocab, shards, run, "--strategy", "multi_worker",
                            "--checkpoint-every", "2", "--log-every", "1", steps=4)
    outputs = run_workers(args)
    assert "finished at step 4" in outputs[0]  # the chief reports
    assert "finished at step" not in outputs[1]  # the other worker stays quiet
    assert sorted(os.listdir(os.path.join(run, "checkpoints"))) == [
        "ckpt-2.data-00000-of-00001", "ckpt-2.index", "ckpt-2.manifest.json",
        "ckpt-4.data-00000-of-00001", "ckpt-4.index", "ckpt-4.manifest.json"]
    config = json.load(open(os.path.join(run, "config.json")))
    assert config["strategy"] == {"name": "multi_worker", "replicas": 2, "workers": 2,
                                  "class": "CollectiveAllReduceStrategy"}
    with open(os.path.join(run, "history.jsonl")) as f:
        assert [json.loads(line)["step"] for line in f] == [1, 2, 3, 4]
    for name in ("backbone.keras", "pretrainer.keras", "training_curve.png"):
        assert os.path.exists(os.path.join(run, name))

    # Both workers resume from the chief's checkpoint and go on to step 6.
    args[args.index("--steps") + 1] = "6"
    outputs = run_workers(args + ["--resume"])
    assert "Resumed from" in outputs[0] and "finished at step 6" in outputs[0]
    assert "ckpt-6.index" in os.listdir(os.path.join(run, "checkpoints"))
    with open(os.path.join(run, "history.jsonl")) as f:
        assert [json.loads(line)["step"] for line in f] == [1, 2, 3, 4, 5, 6]
