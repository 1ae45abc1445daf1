"""`--search` at the grid's edge: when the best learning rate is the
grid's highest or lowest, one more trial runs one step past that edge (the
grid's own spacing) and search.json says where the optimum lies. The trial
processes here are stubs whose dev score is a fixed function of the rate
(a peak at a chosen rate), so the search's own logic runs, no model
trains, and every outcome is known in advance."""

import json
import math
import os
import subprocess
import sys
import time

import pytest

from kerasbert.training import search
from kerasbert.training import search_trials
from kerasbert.training.configs import FinetuneConfig
from kerasbert.training.search import edge_extension
from kerasbert.training.search import locate_optimum

# The stub trial: score = 1 - |log10(rate / PEAK)| / 10, written where a
# fine-tuning run writes it.
_STUB = """
import json, math, os, sys
folder, rate, peak = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
score = 1.0 - abs(math.log10(rate / peak)) / 10.0
with open(os.path.join(folder, "metrics.json"), "w") as f:
    json.dump({"validation": {"accuracy": score}, "selection": {"kept_epoch": 1}}, f)
with open(os.path.join(folder, "config.json"), "w") as f:
    json.dump({"learning_rate": rate}, f)
"""


def test_the_step_past_an_edge_keeps_the_grids_spacing():
    small_bert = (1e-3, 3e-4, 1e-4, 5e-5, 3e-5)
    assert edge_extension(small_bert, 1e-3) == 3e-3  # 1e-3 * (1e-3 / 3e-4), rounded
    assert edge_extension(small_bert, 3e-5) == 2e-5  # 3e-5 / (5e-5 / 3e-5) = 1.8e-5
    assert edge_extension((1e-4, 1e-3), 1e-4) == 1e-5
    assert edge_extension((5e-5, 4e-5), 5e-5) == 6e-5  # 6.25e-5 rounded, still outside
    # A rounding that would land back inside the grid keeps the exact step.
    assert math.isclose(edge_extension((1.1e-4, 1e-4), 1.1e-4), 1.21e-4)
    assert edge_extension(small_bert, 1e-4) is None  # inside
    assert edge_extension((1e-3,), 1e-3) is None  # one rate: no spacing
    assert edge_extension((3e-3, 1e-6), 3e-3) is None  # 9.0: not a learning rate


def test_where_the_optimum_lies():
    def rec(trial, rate, score):
        return {"trial": str(trial), "values": {"learning_rate": rate}, "score": score}

    grid = (1e-3, 3e-4)
    beyond = locate_optimum([rec(0, 1e-3, 0.8), rec(1, 3e-4, 0.7), rec(2, 3e-3, 0.9)], grid,
                            3e-3)
    assert (beyond["position"], beyond["side"], beyond["learning_rate"]) == ("edge", "upper",
                                                                            3e-3)
    assert "may lie further out" in beyond["summary"]
    bracketed = locate_optimum([rec(0, 1e-3, 0.8), rec(1, 3e-4, 0.7), rec(2, 3e-3, 0.6)], grid,
                               3e-3)
    assert bracketed["position"] == "inside" and bracketed["learning_rate"] == 1e-3
    assert bracketed["tried"] == [3e-4, 1e-3, 3e-3] and "scored lower" in bracketed["summary"]
    unextended = locate_optimum([rec(0, 1e-3, 0.6), rec(1, 3e-4, 0.7)], grid)
    assert (unextended["position"], unextended["side"]) == ("edge", "lower")
    single = locate_optimum([rec(0, 1e-3, 0.6)], (1e-3,))
    assert single["position"] == "single"


@pytest.fixture
def stub_search(monkeypatch):
    """run_search with stub trials peaking at the rate the test chooses."""
    from kerasbert.models import BertBackbone
    from kerasbert.training import finetune

    peak = {}
    launched = []  # every trial process started, so a trial run twice shows

    def start(trial, config, output_dir, slot, parallel):
        launched.append(trial.trial_id)
        values = dict(trial.hyperparameters.values)
        restart = values.pop("restart", 0)
        folder = os.path.join(output_dir, search.TRIALS_DIR, f"trial_{trial.trial_id}")
        os.makedirs(folder, exist_ok=True)
        process = subprocess.Popen([sys.executable, "-c", _STUB, folder,
                                    repr(values["learning_rate"]), repr(peak["rate"])])
        return process, {"trial": trial.trial_id, "values": values, "restart": int(restart),
                         "seed": config.seed, "folder": folder, "started": time.time()}

    monkeypatch.setattr(search_trials, "start_trial", start)
    # The size a search reads from the model: a 4 x 256 BERT, no model loaded.
    monkeypatch.setattr(finetune, "describe_model",
                        lambda config: (BertBackbone, 4, 256, "classification"))

    def run(tmp_path, rates, rate, **kwargs):
        launched.clear()
        peak["rate"] = rate
        config = FinetuneConfig(task="csv:train.csv", output_dir=str(tmp_path / "out"),
                                backbone="b.keras", vocab="vocab.txt")
        grid = ["lr=" + ",".join(f"{r:g}" for r in rates), "batch=16", "epochs=2"]
        result = search.run_search(config, grid, **kwargs)
        result["launched"] = list(launched)
        return result

    return run


def _rates(result):
    return [t["values"]["learning_rate"] for t in sorted(result["trials"],
                                                          key=lambda t: int(t["trial"]))]


def test_a_best_rate_at_the_edge_runs_one_step_past_it(stub_search, tmp_path):
    result = stub_search(tmp_path, (1e-4, 3e-4, 1e-3), 2e-2)  # optimum far above the grid
    assert _rates(result) == [1e-4, 3e-4, 1e-3, 3e-3]  # one step, then it stops
    assert result["launched"] == ["0", "1", "2", "3"]  # each trial once
    optimum = result["optimum"]
    assert (optimum["position"], optimum["side"], optimum["extended"]) == ("edge", "upper", 3e-3)
    assert result["best"]["values"] == {"learning_rate": 3e-3, "batch_size": 16, "epochs": 2}
    out = tmp_path / "out"
    table = json.loads((out / "search.json").read_text())
    assert table["optimum"] == optimum and table["grid"]["learning_rate"] == [1e-4, 3e-4, 1e-3]
    kept = json.loads((out / "config.json").read_text())
    assert kept["learning_rate"] == 3e-3 and kept["search"]["optimum"]["extended"] == 3e-3
    # Resumed, the finished search (the step past the edge included) runs nothing again.
    again = stub_search(tmp_path, (1e-4, 3e-4, 1e-3), 2e-2, resume=True)
    assert _rates(again) == _rates(result) and again["optimum"] == optimum
    assert again["launched"] == []


def test_the_step_past_the_lower_edge_can_bracket_the_optimum(stub_search, tmp_path):
    result = stub_search(tmp_path, (1e-4, 1e-3), 8e-5)
    assert _rates(result) == [1e-4, 1e-3, 1e-5] and result["launched"] == ["0", "1", "2"]
    optimum = result["optimum"]
    assert (optimum["position"], optimum["learning_rate"]) == ("inside", 1e-4)
    assert result["best"]["values"]["learning_rate"] == 1e-4


def test_an_inside_optimum_or_no_extend_runs_the_grid_only(stub_search, tmp_path):
    inside = stub_search(tmp_path / "a", (1e-4, 3e-4, 1e-3), 3e-4)
    assert _rates(inside) == [1e-4, 3e-4, 1e-3] and inside["optimum"]["position"] == "inside"
    kept_edge = stub_search(tmp_path / "b", (1e-4, 3e-4, 1e-3), 2e-2, extend=False)
    assert _rates(kept_edge) == [1e-4, 3e-4, 1e-3]
    assert (kept_edge["optimum"]["position"], kept_edge["optimum"]["extended"]) == ("edge", None)
    assert "may lie beyond" in kept_edge["optimum"]["summary"]


def test_a_resumed_search_keeps_its_stored_grid_seeds_and_trial_list(stub_search, tmp_path):
    """--resume alone continues the grid search.json stored (not the
    recipe's); another grid or seed count is refused naming both; the
    stored seed is kept whatever --seed says now."""
    from kerasbert.errors import UsageError

    first = stub_search(tmp_path, (1e-4, 3e-4), 3e-4, extend=False)
    out = tmp_path / "out"
    table = json.loads((out / "search.json").read_text())
    assert table["grid"] == {"learning_rate": [1e-4, 3e-4], "batch_size": [16],
                             "epochs": [2]}
    assert table["seed"] == 12345 and table["restarts"] == 1
    assert table["trial_list"] == [
        {"learning_rate": 1e-4, "batch_size": 16, "epochs": 2, "seed": 12345},
        {"learning_rate": 3e-4, "batch_size": 16, "epochs": 2, "seed": 12345}]
    # --resume alone: the stored grid, nothing run again (not the recipe's 25 trials).
    config = FinetuneConfig(task="csv:train.csv", output_dir=str(out), backbone="b.keras",
                            vocab="vocab.txt", seed=7)
    again = search.run_search(config, [], resume=True, extend=False)
    assert _rates(again) == _rates(first) and again["grid"]["learning_rate"] == (1e-4, 3e-4)
    assert json.loads((out / "search.json").read_text())["seed"] == 12345
    before = (out / "search.json").read_text()
    for items, restarts, fragments in (
            (["lr=1e-3,3e-4"], None, ["lr=0.0001,0.0003 batch=16 epochs=2", "lr=0.001,0.0003"]),
            (["epochs=3"], None, ["epochs=2", "asks for epochs=3"]),
            ([], 2, ["1 seed(s)", "--restarts asks for 2"])):
        with pytest.raises(UsageError) as refused:
            search.run_search(config, items, restarts=restarts, resume=True, extend=False)
        assert all(f in str(refused.value) for f in fragments), str(refused.value)
        assert (out / "search.json").read_text() == before
    # The same grid given again is the same search.
    same = search.run_search(config, ["lr=1e-4,3e-4", "batch=16", "epochs=2"], resume=True,
                             extend=False)
    assert _rates(same) == _rates(first)
