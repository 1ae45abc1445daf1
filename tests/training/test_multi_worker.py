"""MultiWorkerMirroredStrategy: two worker processes on 127.0.0.1 train
one model together through the custom loop; only the chief writes to the
run directory."""

import json
import os
import socket
import subprocess
import sys

import pretrain_data as pd
import pytest


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return pd.make_data(str(tmp_path_factory.mktemp("mw-data")))


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_workers(cluster, args):
    """Runs one `kerasbert pretrain` process per worker; returns their stdouts."""
    procs = []
    for index in range(len(cluster["worker"])):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=pd.REPO,
                   TF_CONFIG=json.dumps({"cluster": cluster,
                                         "task": {"type": "worker", "index": index}}))
        procs.append(subprocess.Popen([sys.executable, "-m", "kerasbert", *args], env=env,
                                      cwd=pd.REPO, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outputs = [p.communicate(timeout=400) for p in procs]
    for p, (out, err) in zip(procs, outputs):
        assert p.returncode == 0, out[-2000:] + err[-3000:]
    return [out for out, _ in outputs]


def test_two_workers_train_and_only_chief_writes(data, tmp_path):
    vocab, shards = data
    run = str(tmp_path / "run")
    cluster = {"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]}
    args = pd.pretrain_args(vocab, shards, run, "--strategy", "multi_worker",
                            "--checkpoint-every", "2", "--log-every", "1", steps=4)
    outputs = run_workers(cluster, args)
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
    outputs = run_workers(cluster, args + ["--resume"])
    assert "Resumed from" in outputs[0] and "finished at step 6" in outputs[0]
    assert "ckpt-6.index" in os.listdir(os.path.join(run, "checkpoints"))
    with open(os.path.join(run, "history.jsonl")) as f:
        assert [json.loads(line)["step"] for line in f] == [1, 2, 3, 4, 5, 6]
