"""MultiWorkerMirroredStrategy: two worker processes on 127.0.0.1 train
one model together through the custom loop; only the chief writes to the
run directory."""

import json
import os
import subprocess
import sys
import tempfile
import time

import pretrain_data as pd
import pytest

from kerasbert.testing.ports import PORT_TAKEN
from kerasbert.testing.ports import free_ports


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return pd.make_data(str(tmp_path_factory.mktemp("mw-data")))


def run_workers(args, attempts=3, timeout=400):
    """Runs one `kerasbert pretrain` process per worker on fresh ports;
    returns their stdouts. When a worker fails the others are stopped (they
    would wait for it); when it failed because its port was taken before it
    could bind it (the cluster never formed, nothing was trained), all
    start over on other ports."""
    for attempt in range(attempts):
        cluster = {"worker": [f"127.0.0.1:{p}" for p in free_ports(2)]}
        procs, logs = [], []
        for index in range(len(cluster["worker"])):
            env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=pd.REPO,
                       TF_CONFIG=json.dumps({"cluster": cluster,
                                             "task": {"type": "worker", "index": index}}))
            out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
            logs.append((out, err))
            procs.append(subprocess.Popen([sys.executable, "-m", "kerasbert", *args], env=env,
                                          cwd=pd.REPO, stdout=out, stderr=err, text=True))
        deadline = time.time() + timeout
        while any(p.poll() is None for p in procs) and time.time() < deadline:
            if any(p.poll() not in (None, 0) for p in procs):
                break
            time.sleep(0.2)
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        outputs = []
        for out, err in logs:
            out.seek(0)
            err.seek(0)
            outputs.append((out.read(), err.read()))
            out.close()
            err.close()
        failed = [(out, err) for p, (out, err) in zip(procs, outputs) if p.returncode != 0]
        if not failed:
            return [out for out, _ in outputs]
        taken = any(marker in err for _, err in failed for marker in PORT_TAKEN)
        if not taken or attempt == attempts - 1:
            out, err = failed[0]
            raise AssertionError(out[-2000:] + err[-3000:])


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
