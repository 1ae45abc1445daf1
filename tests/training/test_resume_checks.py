"""`pretrain --resume` against the run's config.json: another architecture
is refused naming each value that differs; other data is refused (moved
data is not other data); a new batch size or sequence length is accepted
with a warning and a note in history.jsonl, the data starting over."""

import json
import os
import shutil

import pytest

import pretrain_data as pd
from kerasbert.cli import main
from kerasbert.errors import UsageError
from kerasbert.training.checkpoints import read_manifest
from kerasbert.training.configs import PretrainConfig
from kerasbert.training.resume_checks import check_same_architecture, resume_changes, saved_input

from slow_marks import slow_covered_by

SHARDS = [{"file": "a.tfrecord", "bytes": 100, "records": 3},
          {"file": "b.tfrecord", "bytes": 90, "records": 2}]


def previous(**data):
    """What a checkpoint's manifest records about its input position."""
    return {"batch_size": 8, "workers": 1, "max_seq_length": 32,
            "max_predictions_per_seq": 5, "shards": SHARDS, "seed": 1, "start_step": 0,
            **data}


def config(batch_size=8):
    return PretrainConfig(preset="bert_tiny", vocab="v", data="DATA", output_dir="RUN",
                          steps=10, batch_size=batch_size)


def test_saved_input_from_manifest_else_config_json(tmp_path):
    config_json = {"pretrain": {"batch_size": 8}, "strategy": {"workers": 1},
                   "data": {"max_seq_length": 32, "max_predictions_per_seq": 5,
                            "shards": SHARDS}}
    prefix = str(tmp_path / "ckpt-4")
    assert saved_input(prefix, config_json) == dict(previous(), seed=None, start_step=None)
    (tmp_path / "ckpt-4.manifest.json").write_text(json.dumps(
        {"files": {}, "info": previous(batch_size=16)}))
    assert saved_input(prefix, config_json)["batch_size"] == 16


def test_same_input_has_no_changes():
    assert resume_changes(previous(), config(), 32, 5, [dict(s) for s in SHARDS]) == {}
    assert resume_changes(None, config(), 64, 9, []) == {}


def test_batch_size_and_sequence_length_changes():
    assert resume_changes(previous(), config(16), 32, 5, SHARDS) == {"batch_size": [8, 16]}
    # New data at a new sequence length: phase 2 of the same run.
    other = [{"file": "c.tfrecord", "bytes": 7, "records": 1}]
    assert resume_changes(previous(), config(), 128, 20, other) == {
        "max_seq_length": [32, 128], "max_predictions_per_seq": [5, 20]}
    assert resume_changes(previous(), config(), 32, 5, SHARDS, num_workers=2) == {
        "workers": [1, 2]}


@pytest.mark.parametrize("given, phrase", [
    (SHARDS[:1], "the run read 2 files, the given data has 1"),
    ([SHARDS[0], dict(SHARDS[1], bytes=91)], "b.tfrecord had 90 bytes in the run, the given "
                                             "one has 91"),
    ([SHARDS[0], dict(SHARDS[1], file="c.tfrecord")], "the run read b.tfrecord where"),
])
def test_other_data_is_refused(given, phrase):
    with pytest.raises(UsageError) as err:
        resume_changes(previous(), config(), 32, 5, given)
    assert "--data DATA is not the data this run was trained on" in str(err.value)
    assert phrase in str(err.value)


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


# 24 s: four pretrain runs against one run directory; the default suite checks each
# comparison on saved configs and resumes a real run.
@slow_covered_by("tests/training/test_resume_checks.py::test_architecture_differences_are_named",
                 "tests/training/test_resume_checks.py::test_other_data_is_refused",
                 "tests/training/test_resume_checks.py::test_batch_size_and_sequence_length_changes",
                 "tests/training/test_pretrain_cli.py::test_existing_run_needs_resume")
def test_resume_checks_against_the_run(data, tmp_path, capsys):
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
    assert [r["step"] for r in pd.history(run)] == [1, 2]
    assert json.load(open(os.path.join(run, "config.json")))["backbone"]["hidden_dim"] == 32

    # Other data (one shard of the two): refused.
    one_shard = args("--resume", steps=4)
    one_shard[one_shard.index(shards)] = os.path.join(shards, "part-00000-of-00002.tfrecord")
    assert main(one_shard) == 2
    assert "is not the data this run was trained on" in capsys.readouterr().err

    # A new batch size: warned, noted in the history, the data starts over.
    # The checkpoint's own manifest says which batch size its input position
    # belongs to, even when config.json already names the new one (written
    # by a resume that was killed before its first checkpoint).
    assert read_manifest(os.path.join(run, "checkpoints", "ckpt-2"))["info"]["batch_size"] == 8
    config_path = os.path.join(run, "config.json")
    rewritten = json.load(open(config_path))
    rewritten["pretrain"]["batch_size"] = 16
    json.dump(rewritten, open(config_path, "w"))
    assert main(args("--resume", steps=4, batch_size=16)) == 0
    err = capsys.readouterr().err
    assert "warning: --resume at step 2: batch_size 8 -> 16" in err
    history = pd.history(run)
    assert [r["step"] for r in history] == [1, 2, 2, 3, 4]
    note = history[2]
    assert note["event"] == "resume" and note["changed"] == {
        "batch_size": {"run": 8, "given": 16}}
    saved = json.load(open(os.path.join(run, "config.json")))
    assert saved["pretrain"]["batch_size"] == 16
    assert saved["data"]["start_step"] == 2 and saved["data"]["seed"] == 12345 + 2
    info = read_manifest(os.path.join(run, "checkpoints", "ckpt-4"))["info"]
    assert (info["batch_size"], info["start_step"], info["seed"]) == (16, 2, 12345 + 2)

    # Same settings again: an exact resume, no new note.
    assert main(args("--resume", steps=6, batch_size=16)) == 0
    assert "warning" not in capsys.readouterr().err
    assert [r["step"] for r in pd.history(run)] == [1, 2, 2, 3, 4, 5, 6]
    assert json.load(open(os.path.join(run, "config.json")))["data"]["start_step"] == 2
    assert os.path.exists(os.path.join(run, "training_curve.png"))
    shutil.rmtree(run)
