"""`kerasbert finetune --search`: the BERT paper's dev-set search, as one flag.

The paper fine-tunes each GLUE task with every learning rate of a small grid
(and batch sizes and epochs), restarts small datasets with several seeds, and
keeps the model that scores best on the dev set. Here:

    grid       learning_rate x batch_size x epochs (x seed for --restarts N):
               `--search` alone takes the recipe's grid (the model's default
               recipe, or --recipe's), `--search lr=1e-4,3e-4 batch=16,32
               epochs=3,5` chooses; a dimension left out keeps its one value.
    oracle     a KerasTuner `Oracle` walking the grid hands out the trials and
               keeps their state in OUT/search/ (oracle.json, trial_*/trial.json),
               so a killed search resumes where it stopped (--resume): finished
               trials are not run again, the one cut off is. OUT/search.json
               holds the grid, the seeds and the trial list from the start:
               --resume continues exactly those (alone, or with the same
               --search), and refuses another grid naming both.
    a trial    one fine-tuning run in its own process (`python -m
               kerasbert.training.search_trials`), written to OUT/trials/trial_N/,
               scored with the task's own metric of its best epoch.
    parallel   --parallel-trials N runs N trial processes at once, each with
               its share of the CPU threads and its own GPU, or none: never
               two on one GPU.
    the edge   when the best learning rate is the grid's highest or lowest,
               the optimum may lie outside it: the search runs one more rate,
               one step past that edge with the grid's own spacing (3e-3 past
               1e-3, 3e-4; rounded to one significant digit), at the best
               trial's batch size and epochs, then stops (`extend=False`,
               `--no-extend`: the grid only). search.json's "optimum" says where
               the best rate lies: inside the rates tried, or at an edge.
    result     the best trial's run becomes OUT's (model.keras, config.json
               with a "search" entry, tokenizer files, metrics.json), with
               OUT/search.json (every trial: values, score, kept epoch, wall
               time) and OUT/search.png (score against learning rate).
"""

import contextlib
import dataclasses
import json
import os
import shutil

from kerasbert.errors import UsageError
from kerasbert.io_utils import atomic_write_text
from kerasbert.training.search_grid import VALUE_TYPES
from kerasbert.training.search_grid import best_record
from kerasbert.training.search_grid import describe_grid
from kerasbert.training.search_grid import edge_extension
from kerasbert.training.search_grid import full_grid
from kerasbert.training.search_grid import locate_optimum
from kerasbert.training.search_grid import parse_grid  # noqa: F401 (commands/finetune.py)
from kerasbert.training.search_grid import trial_list
from kerasbert.training.search_trials import SEARCH_DIR
from kerasbert.training.search_trials import SEARCH_JSON
from kerasbert.training.search_trials import SEARCH_PLOT
from kerasbert.training.search_trials import TRIALS_DIR
from kerasbert.training.search_trials import grid_oracle
from kerasbert.training.search_trials import run_trials
from kerasbert.training.search_trials import write_table

#: Files of the best trial's run that become the search output's.
_SKIP = {SEARCH_DIR, TRIALS_DIR, SEARCH_JSON, SEARCH_PLOT}


def run_search(config, grid_items, restarts=None, parallel=1, resume=False, extend=True):
    """Runs the search and makes its best trial the run at config.output_dir.

    Args:
        config: a validated `FinetuneConfig` (the flags every trial shares).
        grid_items: `--search`'s KEY=VALUES items ([] for the recipe's grid;
            with `resume`, the grid the search stored).
        restarts: seeds per setting (`--restarts`; None: 1, or with
            `resume` the stored number).
        parallel: trial processes at once (`--parallel-trials`).
        resume: continue the search in config.output_dir (`--resume`): the
            grid, seeds and trial list stored in search.json, exactly; a
            different `--search` grid or `--restarts` is refused.
        extend: when the best learning rate is an edge of the grid, try one
            step past it (`edge_extension`) before stopping (`--no-extend`:
            False).

    Returns:
        {"best": the best trial's record, "trials": every record, "metric",
        "grid", "optimum": `locate_optimum`'s answer, "outputs": {name: path}}.
    """
    given = parse_grid(grid_items)  # before any work: a bad grid writes nothing
    if (restarts is not None and restarts < 1) or parallel < 1:
        raise UsageError("--restarts and --parallel-trials must be >= 1.")
    output_dir = os.path.abspath(config.output_dir)
    grid, restarts, config, metric = _search_plan(config, given, restarts, output_dir, resume)
    header = {"metric": metric, "grid": {k: list(v) for k, v in grid.items()},
              "restarts": restarts, "seed": config.seed,
              "trial_list": trial_list(grid, restarts, config.seed)}
    # A failed trial is not finished: --resume runs it again (its cause may
    # be fixed now), under its own id and folder.
    records = ({k: r for k, r in _previous_records(output_dir).items()
                if r.get("score") is not None} if resume else {})
    # The grid, seeds and trial list are on disk before the search state and
    # the first trial: a search killed at any point resumes exactly
    # (--resume alone).
    os.makedirs(output_dir, exist_ok=True)
    write_table(output_dir, records, header)
    oracle, total = grid_oracle(output_dir, grid, restarts, metric, resume)
    print(f"search: {total} trial(s) over {describe_grid(grid, restarts)}, scored by dev "
          f"{metric}; {len(records)} finished before", flush=True)
    run_trials(oracle, config, output_dir, parallel, records, header)
    extended = _past_the_edge(config, grid, output_dir, parallel, records, header) \
        if extend else None
    done = [r for r in records.values() if r["score"] is not None]
    if not done:
        raise UsageError(_every_trial_failed(records))
    best = best_record(done)
    optimum = locate_optimum(done, grid["learning_rate"], extended)
    table = write_table(output_dir, records, header, best, optimum)
    outputs = _adopt(best, output_dir, table)
    return {"best": best, "trials": list(records.values()), "metric": metric, "grid": grid,
            "optimum": optimum, "outputs": outputs}


def _search_plan(config, given, restarts, output_dir, resume):
    """(grid, restarts, config, metric) of a new search (`given` completed
    from the recipe) or of the stored one it resumes; refuses a new search
    over an old one and a resume of none."""
    # lazy: tensorflow (the search process itself only reads the model's size)
    from kerasbert.models import presets
    from kerasbert.tasks import task_types
    from kerasbert.training.finetune import describe_model

    state = os.path.join(output_dir, SEARCH_DIR)
    if os.path.isdir(state) and not resume:
        if not config.overwrite:
            raise UsageError(f"{output_dir} holds a search already: --resume continues it "
                             "(finished trials are not run again, failed ones are), "
                             "--overwrite starts it over, or pick another --output-dir.")
        _remove_search(output_dir)
    if resume and not os.path.isdir(state):
        raise UsageError(f"--resume: no search in {output_dir} to continue.")
    stored = _stored_search(output_dir) if resume else None
    backbone_class, num_layers, hidden_dim, task_type_name = describe_model(config)
    family = presets.family_of(backbone_class)
    if stored is not None:
        grid, restarts, config = _continue_stored(stored, given, restarts, config, output_dir,
                                                  family, num_layers, hidden_dim)
    else:
        grid = full_grid(given, config, family, num_layers, hidden_dim)
        restarts = restarts or 1
    return grid, restarts, config, task_types.get(task_type_name).selection_metric(config.task)


def _past_the_edge(config, grid, output_dir, parallel, records, header):
    """When the best rate so far is an edge of the grid: runs one step past
    it (`edge_extension`) at the best trial's other values, and returns
    that rate; else None. The question is where the optimum lies along
    the rate, not a new grid."""
    restarts, metric = header["restarts"], header["metric"]
    base = [r for r in records.values() if r["score"] is not None
            and r["values"].get("learning_rate") in grid["learning_rate"]]
    if not base:
        return None
    edge_best = best_record(base)
    extended = edge_extension(grid["learning_rate"], edge_best["values"]["learning_rate"])
    if extended is None:
        return None
    values = dict(edge_best["values"], learning_rate=extended)
    extra = [dict(values, restart=r) if restarts > 1 else values for r in range(restarts)]
    print(f"search: the best rate, {edge_best['values']['learning_rate']:g}, is the "
          f"grid's edge; one step past it: {extended:g}", flush=True)
    header["trial_list"] += [dict(values, seed=config.seed + 1000 * r)
                             for r in range(restarts)]
    oracle, _ = grid_oracle(output_dir, grid, restarts, metric, True, extra)
    run_trials(oracle, config, output_dir, parallel, records, header)
    return extended


def _remove_search(output_dir):
    """Removes a search's own files (its state, trials and table) from
    `output_dir` for --overwrite; the model files it adopted are replaced
    when the new search adopts its best."""
    for name in (SEARCH_DIR, TRIALS_DIR):
        shutil.rmtree(os.path.join(output_dir, name), ignore_errors=True)
    for name in (SEARCH_JSON, SEARCH_PLOT):
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(output_dir, name))


def _previous_records(output_dir):
    path = os.path.join(output_dir, SEARCH_JSON)
    try:
        with open(path, encoding="utf-8") as f:
            return {r["trial"]: r for r in json.load(f)["trials"]}
    except (OSError, ValueError, KeyError):
        return {}


def _stored_search(output_dir):
    """search.json's grid, restarts and seed ({"grid", "restarts", "seed"}),
    or None for a search written before they were stored."""
    path = os.path.join(output_dir, SEARCH_JSON)
    try:
        with open(path, encoding="utf-8") as f:
            table = json.load(f)
        grid = {field: tuple(VALUE_TYPES[field](v) for v in table["grid"][field])
                for field in ("learning_rate", "batch_size", "epochs")}
        return {"grid": grid, "restarts": int(table["restarts"]), "seed": table.get("seed")}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _continue_stored(stored, given, restarts, config, output_dir, family, num_layers,
                     hidden_dim):
    """(grid, restarts, config) of a resumed search: the stored ones. A
    `--search` grid (or a grid flag such as --epochs), or `--restarts`,
    other than the stored is refused naming both (the search would mix
    trials of two grids)."""
    grid = stored["grid"]
    named = [f for f in grid if f in given or getattr(config, f) is not None]
    if named:
        asked = full_grid(given, config, family, num_layers, hidden_dim)
        if any(asked[f] != grid[f] for f in named):
            raise UsageError(
                f"--resume: the search in {output_dir} runs {describe_grid(grid)} "
                f"({SEARCH_JSON}); this command asks for "
                f"{describe_grid({f: asked[f] for f in named})}: give --resume alone to "
                "continue it, or another --output-dir for a new search.")
    if restarts is not None and restarts != stored["restarts"]:
        raise UsageError(f"--resume: the search in {output_dir} runs {stored['restarts']} "
                         f"seed(s) per setting ({SEARCH_JSON}); --restarts asks for "
                         f"{restarts}: leave --restarts out to continue it.")
    if stored["seed"] is not None and stored["seed"] != config.seed:
        config = dataclasses.replace(config, seed=int(stored["seed"]))
    return grid, stored["restarts"], config


def _every_trial_failed(records):
    """One line: the first trial's error (the last `error:` line of its log,
    else its last line)."""
    first = min(records.values(), key=lambda r: int(r["trial"]), default=None)
    if first is None:
        return "the search ran no trial."
    log = os.path.join(first["folder"], "trial.log")
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        lines = []
    errors = [line for line in lines if line.startswith("error: ")]
    cause = (errors[-1][len("error: "):] if errors else lines[-1] if lines
             else "exit without output")
    if len(cause) > 300:
        cause = cause[:297] + "..."
    return (f"every trial failed; the first, trial {first['trial']} ({first['values']}): "
            f"{cause} (log: {log})")


def _adopt(best, output_dir, table):
    """The best trial's run becomes the output directory's; returns paths."""
    outputs = {}
    for name in sorted(os.listdir(best["folder"])):
        if name in _SKIP or name in ("trial_config.json", "trial.log"):
            continue
        source, target = os.path.join(best["folder"], name), os.path.join(output_dir, name)
        if os.path.isdir(source):
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target + ".tmp")
            os.replace(target + ".tmp", target)
        outputs[name] = target
    config_path = os.path.join(output_dir, "config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    config["search"] = {"metric": table["metric"], "best_trial": best["trial"],
                        "values": best["values"], "seed": best["seed"],
                        "score": best["score"], "optimum": table["optimum"],
                        "table": SEARCH_JSON}
    atomic_write_text(config_path, json.dumps(config, indent=2))
    outputs[SEARCH_JSON] = os.path.join(output_dir, SEARCH_JSON)
    outputs[SEARCH_PLOT] = plot_search(table, os.path.join(output_dir, SEARCH_PLOT))
    return outputs


def plot_search(table, path):
    """Dev score against learning rate, one line per (batch size, epochs);
    restarts are separate points; the best trial circled."""
    from kerasbert.plotting import new_figure  # lazy: matplotlib
    from kerasbert.plotting import save_figure_atomically  # lazy: matplotlib

    fig = new_figure(figsize=(6, 4))
    ax = fig.subplots()
    groups = {}
    for record in table["trials"]:
        if record["score"] is None:
            continue
        v = record["values"]
        key = (v.get("batch_size"), v.get("epochs"))
        groups.setdefault(key, []).append((v.get("learning_rate"), record["score"], record))
    for (batch, epochs), points in sorted(groups.items(),
                                          key=lambda kv: (kv[0][0] or 0, kv[0][1] or 0)):
        points.sort(key=lambda p: p[0])
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                label=f"batch {batch}, {epochs} epochs")
        for lr, score, record in points:
            if record["trial"] == table["best_trial"]:
                ax.plot([lr], [score], marker="o", markersize=14, fillstyle="none",
                        color="black", label="kept")
    ax.set_xscale("log")
    ax.set(xlabel="learning rate", ylabel=f"dev {table['metric']}",
           title=f"Search: {len(table['trials'])} trials")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure_atomically(fig, path)
    return path


