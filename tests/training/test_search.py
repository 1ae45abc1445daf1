"""`kerasbert finetune --search`: the grid, the best trial kept (its weights
become the run's), and a search killed mid-way resuming without running its
finished trials again, each step in a fresh process as users run it."""

import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest

import pretrain_data as pd
from reliability.console import KERASBERT
from reliability.console import env
from reliability.console import kerasbert
from reliability.console import ok
from reliability.console import one_line_error
from reliability.console import tree
from test_finetune_cli import write_classification

from kerasbert.errors import UsageError
from kerasbert.training.configs import FinetuneConfig
from kerasbert.training.search import full_grid
from kerasbert.training.search import parse_grid

from slow_marks import slow_covered_by


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from kerasbert.models import BertBackbone

    root = tmp_path_factory.mktemp("search")
    vocab, _ = pd.make_data(str(root))
    size = len(open(vocab, encoding="utf-8").read().splitlines())
    BertBackbone(vocabulary_size=size, num_layers=1, num_heads=2, hidden_dim=32,
                 intermediate_dim=64, max_sequence_length=64).save(str(root / "b.keras"))
    write_classification(root / "train.csv", 96, 0)
    write_classification(root / "valid.csv", 40, 1)
    return root


def _args(files, out, *grid):
    return ("finetune", "--backbone", files / "b.keras", "--vocab", files / "vocab.txt",
            "--task", f"csv:{files / 'train.csv'}", "--validation", files / "valid.csv",
            "--output-dir", out, "--max-seq-length", "24", "--no-progress",
            # the grid only: the step past its edge is test_search_edge.py's
            "--no-extend", "--search", *grid)


def test_grid_keys_and_precedence():
    assert parse_grid(["lr=1e-4,3e-4", "batch=16,32", "epochs=3"]) == {
        "learning_rate": (1e-4, 3e-4), "batch_size": (16, 32), "epochs": (3,)}
    assert parse_grid([]) == {}
    for bad in (["rate=1"], ["lr=a"], ["batch=16,16"], ["epochs=0"], ["lr"], ["lr=nan"],
                ["lr=inf"], ["lr=-inf"], ["lr=1e-4", "lr=3e-4"], ["batch=8", "batch_size=16"]):
        with pytest.raises(UsageError):
            parse_grid(bad)
    config = FinetuneConfig(task="t", output_dir="o", epochs=5)
    grid = full_grid({"batch_size": (8,)}, config, "bert", 12, 768)
    # --search's values, then a flag given (epochs 5), then the recipe's grid.
    assert grid == {"learning_rate": (5e-5, 4e-5, 3e-5, 2e-5), "batch_size": (8,),
                    "epochs": (5,)}
    config = FinetuneConfig(task="t", output_dir="o", recipe="swag")
    assert full_grid({}, config, "bert", 12, 768) == {
        "learning_rate": (2e-5,), "batch_size": (16,), "epochs": (3,)}


# 52 s: two trials that train (2 epochs each) and the best one's weights adopted; the
# default suite runs a 2-trial search in fresh processes whose trials fail, and the
# choice and adoption of the best trial with stub trials.
@slow_covered_by(
    "tests/training/test_search.py::test_a_search_whose_every_trial_fails_exits_2_with_the_first_trials_error",
    "tests/training/test_search_edge.py::test_a_best_rate_at_the_edge_runs_one_step_past_it",
    "tests/training/test_search_edge.py::test_an_inside_optimum_or_no_extend_runs_the_grid_only")
def test_a_two_trial_search_keeps_the_best_trials_weights(files, tmp_path):
    """Both trials at once (--parallel-trials 2, one CPU thread each)."""
    from kerasbert.saving import load_model

    out = tmp_path / "out"
    stdout = ok(kerasbert(*_args(files, out, "lr=3e-3,1e-6", "batch=16", "epochs=2"),
                          "--parallel-trials", "2", cwd=tmp_path, timeout=600))
    table = json.loads((out / "search.json").read_text())
    assert table["metric"] == "accuracy" and len(table["trials"]) == 2
    assert all(t["status"] == "COMPLETED" for t in table["trials"])
    scores = {t["trial"]: t["score"] for t in table["trials"]}
    best = max(sorted(scores), key=lambda t: scores[t])  # ties: the first trial
    assert table["best_trial"] == best and f"kept trial {best}" in stdout
    kept = load_model(str(out / "model.keras"), compile=False)
    trial = load_model(str(out / "trials" / f"trial_{best}" / "model.keras"), compile=False)
    for a, b in zip(kept.get_weights(), trial.get_weights()):
        np.testing.assert_array_equal(a, b)
    config = json.loads((out / "config.json").read_text())
    assert config["search"]["best_trial"] == best and config["search"]["score"] == scores[best]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["validation"]["accuracy"] == scores[best]
    assert (out / "search.png").stat().st_size > 1000
    # The same folder again: refused, nothing touched.
    one_line_error(kerasbert(*_args(files, out, "lr=3e-3"), cwd=tmp_path),
                   "already holds a fine-tuned model")


# 98 s: a 3-trial search SIGKILLed after its first trial and resumed; the default suite
# resumes a stub-trial search from its search.json and SIGKILLs and resumes pretrain.
@slow_covered_by(
    "tests/training/test_search_edge.py::test_a_resumed_search_keeps_its_stored_grid_seeds_and_trial_list",
    "tests/training/test_search.py::test_a_search_whose_every_trial_fails_exits_2_with_the_first_trials_error",
    "tests/reliability/test_kills.py::test_kill_pretrain_then_resume")
def test_a_killed_search_resumes_without_repeating_finished_trials(files, tmp_path):
    """... and keeps its word: `--resume` alone continues the grid and seed
    search.json stored (not the recipe's 25 trials, not the default seed);
    another grid is refused naming both, the folder untouched."""
    out = tmp_path / "out"
    args = (*_args(files, out, "lr=3e-3,1e-3,1e-5", "batch=16", "epochs=1"), "--seed", "7")
    search = subprocess.Popen([KERASBERT, *map(str, args)], cwd=tmp_path, env=env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    table_file = out / "search.json"
    deadline = time.time() + 400
    while time.time() < deadline and search.poll() is None:
        if table_file.exists() and json.loads(table_file.read_text())["trials"]:
            break
        time.sleep(0.5)
    assert search.poll() is None, "the search ended before it could be killed"
    os.kill(search.pid, signal.SIGKILL)  # the search process alone: its trial dies with it
    search.wait()
    first = json.loads(table_file.read_text())["trials"]
    assert len(first) == 1
    # Started again without --resume: refused, the search is kept.
    one_line_error(kerasbert(*args, cwd=tmp_path), "--resume continues it")
    done = out / "trials" / f"trial_{first[0]['trial']}"
    stamp = (done / "metrics.json").stat().st_mtime_ns
    before = tree(out)
    one_line_error(kerasbert(*_args(files, out, "lr=1e-4,1e-3", "batch=16", "epochs=1"),
                             "--resume", cwd=tmp_path),
                   "runs lr=0.003,0.001,1e-05 batch=16 epochs=1", "asks for lr=0.0001,0.001")
    assert tree(out) == before
    time.sleep(1)
    resume_alone = [a for a in _args(files, out) if a != "--search"]
    stdout = ok(kerasbert(*resume_alone, "--resume", cwd=tmp_path, timeout=600))
    assert "search: 3 trial(s) over lr=0.003,0.001,1e-05 batch=16 epochs=1" in stdout, stdout
    table = json.loads(table_file.read_text())
    assert sorted(t["trial"] for t in table["trials"]) == ["0", "1", "2"]
    assert table["seed"] == 7 and {t["seed"] for t in table["trials"]} == {7}
    assert [t["learning_rate"] for t in table["trial_list"]] == [3e-3, 1e-3, 1e-5]
    assert (done / "metrics.json").stat().st_mtime_ns == stamp  # not run again
    assert sorted(t["values"]["learning_rate"] for t in table["trials"]) == [1e-5, 1e-3, 3e-3]


@pytest.mark.parametrize("grid, fragments", [
    (["lr=nan"], ["'lr=nan'", "nan is not a finite number > 0"]),
    (["lr=1e-4,inf"], ["inf is not a finite number > 0"]),
    (["lr=1e-4,3e-4,1e-4"], ["0.0001 is given more than once"]),
    (["lr=1e-4", "learning_rate=3e-4"], ["gives learning_rate twice", "'lr=1e-4'"]),
    (["batch=16", "batch=32"], ["gives batch_size twice"]),
])
def test_a_bad_grid_is_refused_before_any_work(files, tmp_path, grid, fragments):
    """Non-finite, repeated values and repeated keys: one line, exit 2,
    nothing written (not trials that all fail, not a silently dropped key)."""
    result = kerasbert(*_args(files, tmp_path / "out", *grid), cwd=tmp_path)
    one_line_error(result, *fragments)
    assert os.listdir(tmp_path) == []


def test_a_search_whose_every_trial_fails_exits_2_with_the_first_trials_error(files,
                                                                              tmp_path):
    """(Each trial asks for more positions than the backbone has.) Today's
    KerasTuner RuntimeError traceback becomes one line naming trial 0's
    own error; no model is kept."""
    out = tmp_path / "out"
    result = kerasbert(*_args(files, out, "lr=1e-3", "batch=16", "epochs=1"),
                       "--max-seq-length", "100", cwd=tmp_path, timeout=600)
    one_line_error(result, "every trial failed; the first, trial 0",
                   "max_seq_length 100 is above the backbone's 64 positions",
                   "trials/trial_0/trial.log")
    table = json.loads((out / "search.json").read_text())
    assert [t["status"] for t in table["trials"]] == ["FAILED"]
    assert not (out / "model.keras").exists() and not (out / "config.json").exists()
    # Issue 51: a failed trial is not finished: --resume runs it again,
    # here with the cause fixed (no --max-seq-length past the positions) ...
    printed = ok(kerasbert(*_args(files, out, "lr=1e-3", "batch=16", "epochs=1"),
                           "--resume", cwd=tmp_path, timeout=600))
    assert "0 finished before" in printed
    table = json.loads((out / "search.json").read_text())
    assert [t["status"] for t in table["trials"]] == ["COMPLETED"]
    assert (out / "model.keras").exists()
    # ... and --overwrite starts a search over in the same folder.
    ok(kerasbert(*_args(files, out, "lr=3e-3", "batch=16", "epochs=1"), "--overwrite",
                 cwd=tmp_path, timeout=600))
    table = json.loads((out / "search.json").read_text())
    assert [t["values"]["learning_rate"] for t in table["trials"]] == [3e-3]
