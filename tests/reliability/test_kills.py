"""SIGKILL in the middle of the commands that write: nothing a reader takes
for valid is left behind, the lock dies with the process, and running the
same command again works (and removes the killed writer's temporaries).

Each test kills at a point where the writer is known to be busy (its
temporary or its first checkpoint exists) plus a seeded random delay; the
assertions hold wherever the kill lands, including after a normal end."""

import json
import os
import random
import sys

import numpy as np
import pytest

from kerasbert import io_utils
from reliability.console import kerasbert, kill_when, ok, start

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "serving"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "training"))
import pretrain_data  # noqa: E402
from serving_fixtures import make_finetuned_dir  # noqa: E402
from slow_marks import slow_covered_by  # noqa: E402


def _temporaries(*folders):
    return [os.path.join(f, n) for f in folders if os.path.isdir(f)
            for n in os.listdir(f) if io_utils.is_temporary(n)]


def _later(seed, at_most):
    """A condition wrapper: true `random` seconds after `condition` first is."""
    import time

    delay, since = random.Random(seed).uniform(0, at_most), []

    def wrap(condition):
        def check():
            if not since and condition():
                since.append(time.monotonic())
            return bool(since) and time.monotonic() - since[0] >= delay
        return check
    return wrap


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("kill-data")
    path = pretrain_data.write_corpus(str(root / "corpus.txt"), num_docs=600)
    vocab, _ = pretrain_data.make_data(str(root), corpus=path, num_shards=1)
    return root, path, vocab


def test_kill_create_pretraining_data(corpus, tmp_path):
    root, path, vocab = corpus
    out = tmp_path / "shards"
    args = ("create-pretraining-data", "--input", path, "--vocab", vocab, "--output-dir", out,
            "--max-seq-length", "64", "--dupe-factor", "5", "--num-shards", "2", "--no-progress")
    process = start(*args, cwd=tmp_path)
    assert kill_when(process, _later(1, 0.5)(lambda: bool(_temporaries(out))))
    # Killed while writing: no metadata.json, so no reader takes the folder
    # for finished data, and the shards are still hidden temporaries.
    assert not (out / "metadata.json").exists()
    assert [n for n in os.listdir(out) if not n.startswith(".")] == []
    ok(kerasbert(*args, "--overwrite", cwd=tmp_path))
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["num_instances"] > 0
    assert not _temporaries(out, tmp_path) and not os.path.exists(io_utils.lock_path(out))


def test_kill_pretrain_then_resume(corpus, tmp_path):
    root, _, vocab = corpus
    data = os.path.join(str(root), "data-nsp-32-m")
    run = tmp_path / "run"
    args = pretrain_data.pretrain_args(vocab, data, str(run), "--checkpoint-every", "5",
                                       "--log-every", "1", steps=40)
    process = start(*args, cwd=tmp_path)
    checkpoints = run / "checkpoints"
    assert kill_when(process, _later(2, 1.0)(
        lambda: checkpoints.is_dir() and any(n.endswith(".index") for n in os.listdir(checkpoints))))
    # The final models are written only at the end.
    assert not (run / "backbone.keras").exists() and not (run / "pretrainer.keras").exists()
    ok(kerasbert(*args, "--resume", cwd=tmp_path))
    steps = [json.loads(line)["step"] for line in (run / "history.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 41)), steps
    assert (run / "backbone.keras").stat().st_size > 0
    assert not _temporaries(run, tmp_path) and not os.path.exists(io_utils.lock_path(run))


# 27 s: a console finetune SIGKILLed mid-run and run again; the default suite kills and
# reruns a console pretrain, fine-tunes in a fresh process, and takes over dead
# writers' locks and temporaries.
@slow_covered_by("tests/reliability/test_kills.py::test_kill_pretrain_then_resume",
                 "tests/training/test_finetune_cli.py::test_multi_worker_strategy_two_console_script_processes",
                 "tests/reliability/test_writers.py::test_a_stale_lock_file_of_a_dead_process_does_not_block",
                 "tests/reliability/test_writers.py::test_temporaries_of_killed_writers_are_removed_under_the_lock")
def test_kill_finetune(tmp_path):
    from kerasbert.models import BertBackbone

    vocab, _ = pretrain_data.make_data(str(tmp_path / "data"))
    size = len(open(vocab, encoding="utf-8").read().splitlines())
    BertBackbone(vocabulary_size=size, num_layers=1, num_heads=2, hidden_dim=32,
                 intermediate_dim=64, max_sequence_length=64).save(tmp_path / "backbone.keras")
    rng = np.random.default_rng(0)
    with open(tmp_path / "train.csv", "w", encoding="utf-8") as f:
        f.write("sentence,label\n")
        for _ in range(200):
            f.write(f"{rng.choice(pretrain_data.SUBJECTS)} {rng.choice(pretrain_data.VERBS)},"
                    f"{rng.choice(['yes', 'no'])}\n")
    ft = tmp_path / "ft"
    args = ("finetune", "--task", "csv:train.csv", "--backbone", "backbone.keras",
            "--vocab", vocab, "--output-dir", ft, "--epochs", "2", "--batch-size", "8",
            "--max-seq-length", "16", "--no-progress")
    process = start(*args, cwd=tmp_path)
    assert kill_when(process, _later(3, 4.0)(lambda: os.path.exists(io_utils.lock_path(ft))))
    # The lock file of the dead writer is still there, but holds no lock.
    assert not (ft / "model.keras").exists()
    ok(kerasbert(*args, cwd=tmp_path))
    assert json.loads((ft / "config.json").read_text())["task_type"] == "classification"
    assert not _temporaries(ft, tmp_path) and not os.path.exists(io_utils.lock_path(ft))


# 35 s: a console export SIGKILLed while writing, then run again; the default suite kills
# and reruns a console pretrain, refuses a console export over a version, and removes
# killed writers' temporaries under the lock.
@slow_covered_by("tests/reliability/test_kills.py::test_kill_pretrain_then_resume",
                 "tests/reliability/test_writers.py::test_export_refuses_an_existing_version_without_overwrite",
                 "tests/reliability/test_writers.py::test_temporaries_of_killed_writers_are_removed_under_the_lock")
def test_kill_export(tmp_path):
    ft = make_finetuned_dir(str(tmp_path / "ft"), "tagging", sequence_length=16)
    out = tmp_path / "export"
    args = ("export", "--model", ft, "--output", out)
    process = start(*args, cwd=tmp_path)
    assert kill_when(process, _later(4, 0.5)(lambda: bool(_temporaries(out))))
    # TF Serving sees only integer names: nothing half-written is one.
    assert not [n for n in os.listdir(out) if n.isdigit()], os.listdir(out)
    assert _temporaries(out)  # what the rerun must clean up
    ok(kerasbert(*args, cwd=tmp_path))
    assert sorted(n for n in os.listdir(out) if n.isdigit()) == ["1"]
    assert not _temporaries(out, tmp_path) and not os.path.exists(io_utils.lock_path(out))
