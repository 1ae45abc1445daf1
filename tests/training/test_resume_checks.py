"""`pretrain --resume` against the run's config.json: another architecture
is refused, naming each value that differs."""

import json
import os
import shutil

import pytest

import pretrain_data as pd
from kerasbert.cli import main
from kerasbert.errors import UsageError
from kerasbert.training.pretrain import check_same_architecture


class FakeBackbone:
    def __init__(self, **config):
        self.config = config

    def get_config(self):
        return dict(self.config)


def test_architecture_differences_are_named():
    run = {"backbone_class": "FakeBackbone", "objectives": ["mlm", "nsp"],
           "backbone": {"name": "b", "hidden_dim": 32, "num_heads": 2, "dropout": 0.1}}
    check_same_architecture(run, FakeBackbone(name="other", hidden_dim=32, num_heads=2,
                                              dropout=0.1), ("mlm", "nsp"), "RUN")
    with pytest.raises(UsageError) as err:
        check_same_architecture(run, FakeBackbone(hidden_dim=64, num_heads=4, dropout=0.1),
                                ("mlm",), "RUN")
    message = str(err.value)
    assert "\n" not in message
    for part in ("hidden_dim: run 32 vs given 64", "num_heads: run 2 vs given 4",
                 "objectives: run mlm+nsp vs given mlm"):
        assert part in message
    assert "dropout" not in message and "name" not in message.split("(")[1]


# --- the command, in this process (TF imported once) ----------------------------


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return pd.make_data(str(tmp_path_factory.mktemp("resume-checks-data")))


def rows(run):
    with open(os.path.join(run, "history.jsonl")) as f:
        return [json.loads(line) for line in f]


def test_resume_with_another_architecture_is_refused(data, tmp_path, capsys):
    vocab, shards = data
    run = str(tmp_path / "run")

    def args(*extra, steps, batch_size=8):
        return pd.pretrain_args(vocab, shards, run, "--checkpoint-every", "2", "--log-every",
                                "1", *extra, steps=steps, batch_size=batch_size)

    assert main(args(steps=2)) == 0
    capsys.readouterr()
    before = sorted(os.listdir(os.path.join(run, "checkpoints")))

    # Another architecture: refused, naming the value; nothing changed.
    assert main(args("--set", "hidden_dim=64", "--set", "intermediate_dim=128", "--resume",
                     steps=4)) == 2
    err = capsys.readouterr().err
    assert "hidden_dim: run 32 vs given 64" in err
    assert "intermediate_dim: run 64 vs given 128" in err
    assert sorted(os.listdir(os.path.join(run, "checkpoints"))) == before
    assert [r["step"] for r in rows(run)] == [1, 2]
    assert json.load(open(os.path.join(run, "config.json")))["backbone"]["hidden_dim"] == 32

    shutil.rmtree(run)
