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
               kerasbert.training.search`), written to OUT/trials/trial_N/,
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

import dataclasses
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import time

from kerasbert.errors import UsageError
from kerasbert.io_utils import atomic_write_text
from kerasbert.optimizers.recipes import RECIPES
from kerasbert.optimizers.recipes import default_recipe
from kerasbert.optimizers.recipes import is_published_checkpoint

#: `--search` keys -> FinetuneConfig fields
KEYS = {"lr": "learning_rate", "learning_rate": "learning_rate", "batch": "batch_size",
        "batch_size": "batch_size", "epochs": "epochs"}
_TYPES = {"learning_rate": float, "batch_size": int, "epochs": int}

SEARCH_DIR, TRIALS_DIR = "search", "trials"
SEARCH_JSON, SEARCH_PLOT = "search.json", "search.png"
#: Files of the best trial's run that become the search output's.
_SKIP = {SEARCH_DIR, TRIALS_DIR, SEARCH_JSON, SEARCH_PLOT}


def parse_grid(items):
    """`["lr=1e-4,3e-4", "batch=16,32"]` -> {"learning_rate": (1e-4, 3e-4),
    "batch_size": (16, 32)}; [] -> {} (the recipe's grid).

    Raises:
        UsageError: an unknown or repeated key (`lr` and `learning_rate` are
            one key), a value that is not a finite number > 0 (NaN and
            infinity included: every trial would fail), a repeated value.
    """
    grid, given = {}, {}
    for item in items or ():
        key, _, values = item.partition("=")
        field = KEYS.get(key.strip())
        if field is None or not values:
            raise UsageError(f"--search {item!r}: expected KEY=V1,V2,... with KEY one of "
                             "lr, batch, epochs.")
        if field in given:
            raise UsageError(f"--search gives {field} twice ({given[field]!r} and {item!r}): "
                             "give each key once, with all its values.")
        given[field] = item
        try:
            parsed = tuple(_TYPES[field](v) for v in values.split(","))
        except ValueError:
            raise UsageError(f"--search {item!r}: {values!r} are not "
                             f"{_TYPES[field].__name__}s.") from None
        bad = [v for v in parsed if not (math.isfinite(v) and v > 0)]
        if bad:
            raise UsageError(f"--search {item!r}: {bad[0]!r} is not a finite number > 0.")
        repeated = sorted({v for v in parsed if parsed.count(v) > 1})
        if repeated:
            raise UsageError(f"--search {item!r}: {repeated[0]!r} is given more than once "
                             "(values must be distinct).")
        grid[field] = parsed
    return grid


def describe_grid(grid, restarts=1):
    """`lr=1e-4,3e-4 batch=16 epochs=3` (x N seeds): a grid as --search
    takes it."""
    names = {"learning_rate": "lr", "batch_size": "batch", "epochs": "epochs"}
    text = " ".join(f"{names.get(k, k)}={','.join(f'{v:g}' for v in vals)}"
                    for k, vals in grid.items())
    return text + (f" x {restarts} seeds" if restarts > 1 else "")


def full_grid(given, config, family, num_layers, hidden_dim):
    """{field: values} of every dimension: `given`, else the recipe's grid,
    else the run's own single value; a flag given on the command line fixes
    its dimension unless `--search` names it."""
    published = is_published_checkpoint(config.preset or config.init_checkpoint)
    recipe = (RECIPES[config.recipe] if config.recipe
              else default_recipe(family, num_layers, hidden_dim, published))
    grid = {}
    for field in ("learning_rate", "batch_size", "epochs"):
        if field in given:
            grid[field] = given[field]
        elif getattr(config, field) is not None:
            grid[field] = (getattr(config, field),)
        else:
            grid[field] = tuple(recipe.grid.get(field, (getattr(recipe, field),)))
    return grid


def edge_extension(rates, best_rate):
    """The learning rate one step past the edge of `rates` that `best_rate`
    lies on, with the grid's own spacing (the ratio of that edge to its
    neighbour: 3e-3 past 1e-3 and 3e-4, 1e-5 below 3e-5 and 1e-4), rounded
    to one significant digit like the papers' grids (the exact step where
    rounding would land back inside a finely spaced grid); None when the
    best rate lies inside the grid, the grid has one rate, or the step would
    leave (0, 1)."""
    rates = sorted(set(rates))
    if len(rates) < 2 or best_rate not in (rates[0], rates[-1]):
        return None
    upper = best_rate == rates[-1]
    exact = rates[-1] ** 2 / rates[-2] if upper else rates[0] ** 2 / rates[1]
    rounded = float(f"{exact:.0e}")
    step = rounded if (rounded > rates[-1] if upper else rounded < rates[0]) else exact
    return step if 0.0 < step < 1.0 else None


def _best(records):
    """The best finished record (ties: the earliest trial)."""
    return max(records, key=lambda r: (r["score"], -int(r["trial"])))


def locate_optimum(records, grid_rates, extended=None):
    """Where the best learning rate lies: {"learning_rate", "position"
    ("inside": rates on both sides scored lower; "edge": the highest or
    lowest rate tried, so the optimum may lie beyond it; "single": one rate
    tried), "side" ("upper"/"lower" at an edge), "grid", "extended" (the
    rate tried one step past the grid's edge, or None), "tried",
    "summary" (one line for people)}."""
    done = [r for r in records if r["score"] is not None]
    best = _best(done)
    rate = best["values"].get("learning_rate")
    tried = sorted({r["values"].get("learning_rate") for r in done})
    side = None
    if len(tried) < 2:
        position, summary = "single", f"one learning rate, {rate:g}, was tried: not searched"
    elif rate in (tried[0], tried[-1]):
        position, side = "edge", "upper" if rate == tried[-1] else "lower"
        if extended is not None and rate == extended:
            summary = (f"{rate:g}, one step past the grid's {side} edge, beat every rate of "
                       "the grid: the optimum may lie further out (the search stops after "
                       "one step)")
        else:
            summary = (f"{rate:g} is the {side} edge of the rates tried: the optimum may lie "
                       "beyond it" + (f" (the step past it, {extended:g}, did not finish)"
                                     if extended is not None else ""))
    else:
        position = "inside"
        summary = (f"{rate:g} lies inside the rates tried ({', '.join(f'{r:g}' for r in tried)})"
                   + (f"; one step past the grid's edge, {extended:g}, scored lower"
                      if extended is not None else ""))
    return {"learning_rate": rate, "position": position, "side": side,
            "grid": sorted(grid_rates), "extended": extended, "tried": tried,
            "summary": summary}


def _hyperparameters(grid, restarts):
    import keras_tuner  # lazy: the search's bookkeeping only

    hp = keras_tuner.HyperParameters()
    for field, values in grid.items():
        hp.Choice(field, list(values), ordered=True)
    if restarts > 1:
        hp.Choice("restart", list(range(restarts)), ordered=True)
    return hp


def _oracle(directory, grid, restarts, metric, resume, extra=()):
    import keras_tuner  # lazy: the search's bookkeeping only

    class GridOracle(keras_tuner.Oracle):
        """Every combination once, in grid order. The next one is whatever
        no saved trial has taken, so a reloaded search continues exactly
        (KerasTuner's GridSearchOracle keeps its walk in memory only, and a
        reloaded one fails looking for it)."""

        def __init__(self, combinations, **kwargs):
            super().__init__(**kwargs)
            self.combinations = combinations

        def populate_space(self, trial_id):
            taken = {json.dumps(t.hyperparameters.values, sort_keys=True)
                     for t in self.trials.values()}
            for values in self.combinations:
                if json.dumps(values, sort_keys=True) not in taken:
                    return {"status": keras_tuner.engine.trial.TrialStatus.RUNNING,
                            "values": values}
            status = "IDLE" if self.ongoing_trials else "STOPPED"
            return {"status": getattr(keras_tuner.engine.trial.TrialStatus, status),
                    "values": None}

    names = list(grid) + (["restart"] if restarts > 1 else [])
    dimensions = list(grid.values()) + ([tuple(range(restarts))] if restarts > 1 else [])
    combinations = [dict(zip(names, values)) for values in itertools.product(*dimensions)]
    combinations += list(extra)  # the step past the grid's edge, after the grid
    space = {field: tuple(dict.fromkeys([*values, *(c[field] for c in extra)]))
             for field, values in grid.items()}
    oracle = GridOracle(combinations, objective=keras_tuner.Objective(metric, direction="max"),
                        max_trials=len(combinations),
                        hyperparameters=_hyperparameters(space, restarts),
                        # never reached: a search whose every trial fails
                        # ends in run_search's one line, not KerasTuner's error
                        max_consecutive_failed_trials=len(combinations) + 1)
    oracle._display.verbose = 0  # our own lines say what runs
    oracle._set_project_dir(directory, SEARCH_DIR)
    if resume:
        oracle.reload()
        # The saved space is the one the search started with: a rate past
        # the grid's edge joins it here.
        oracle.hyperparameters = _hyperparameters(space, restarts)
    return oracle, len(combinations)


def _gpus():
    """How many GPUs this machine shows (without importing TensorFlow)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def _trial_env(slot, parallel):
    """One GPU per trial process (or none), never shared; CPU threads split."""
    env = dict(os.environ)
    if parallel > 1:
        gpus = _gpus()
        env["CUDA_VISIBLE_DEVICES"] = str(slot) if slot < gpus else ""
        threads = max(1, (os.cpu_count() or 1) // parallel)
        env.update(TF_NUM_INTRAOP_THREADS=str(threads), TF_NUM_INTEROP_THREADS="1",
                   OMP_NUM_THREADS=str(threads))
    return env


def _die_with_parent():
    """Linux: the trial process is killed with the search process, so a
    killed search leaves no orphan writing into a trial folder that
    `--resume` runs again."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass


def _start(trial, config, output_dir, slot, parallel):
    """Launches the trial's fine-tuning process; returns (process, record)."""
    values = dict(trial.hyperparameters.values)
    restart = values.pop("restart", 0)
    folder = os.path.join(output_dir, TRIALS_DIR, f"trial_{trial.trial_id}")
    os.makedirs(folder, exist_ok=True)
    trial_config = dataclasses.replace(
        config, output_dir=folder, overwrite=True, progress=False,
        seed=config.seed + 1000 * int(restart), **values)
    spec = os.path.join(folder, "trial_config.json")
    atomic_write_text(spec, json.dumps(dataclasses.asdict(trial_config), indent=2))
    log = open(os.path.join(folder, "trial.log"), "w", encoding="utf-8")
    process = subprocess.Popen([sys.executable, "-m", "kerasbert.training.search", spec],
                               stdout=log, stderr=subprocess.STDOUT,
                               env=_trial_env(slot, parallel), preexec_fn=_die_with_parent)
    log.close()
    return process, {"trial": trial.trial_id, "values": values, "restart": int(restart),
                     "seed": trial_config.seed, "folder": folder, "started": time.time()}


def _finish(oracle, trial, record, returncode, metric):
    """Reports a finished trial process to the oracle; returns its record."""
    import keras_tuner  # lazy: the search's bookkeeping only

    record["seconds"] = round(time.time() - record.pop("started"), 1)
    metrics_file = os.path.join(record["folder"], "metrics.json")
    score, kept = None, None
    if returncode == 0 and os.path.isfile(metrics_file):
        with open(metrics_file, encoding="utf-8") as f:
            written = json.load(f)
        score = (written.get("validation") or {}).get(metric)
        kept = (written.get("selection") or {}).get("kept_epoch")
    record.update(score=score, kept_epoch=kept,
                  status="COMPLETED" if score is not None else "FAILED")
    if score is not None:
        oracle.update_trial(trial.trial_id, {metric: float(score)})
        trial.status = keras_tuner.engine.trial.TrialStatus.COMPLETED
    else:
        trial.status = keras_tuner.engine.trial.TrialStatus.FAILED
        trial.message = f"exit {returncode}; see {record['folder']}/trial.log"
    oracle.end_trial(trial)
    # KerasTuner saves its state inside end_trial while the trial is still
    # listed as running, and a reload retries whatever is listed so: saved
    # again, a reloaded oracle (--resume, the step past the edge) does not run
    # a finished trial a second time.
    oracle.save()
    return record


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
    # lazy: tensorflow (the search process itself only reads the model's size)
    from kerasbert.models import presets
    from kerasbert.tasks import task_types
    from kerasbert.training.finetune import describe_model

    given = parse_grid(grid_items)  # before any work: a bad grid writes nothing
    if (restarts is not None and restarts < 1) or parallel < 1:
        raise UsageError("--restarts and --parallel-trials must be >= 1.")
    output_dir = os.path.abspath(config.output_dir)
    state = os.path.join(output_dir, SEARCH_DIR)
    if os.path.isdir(state) and not resume:
        raise UsageError(f"{output_dir} holds a search already: --resume continues it "
                         "(finished trials are not run again); pick another --output-dir "
                         "to start over.")
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
    metric = task_types.get(task_type_name).selection_metric(config.task)
    header = {"metric": metric, "grid": {k: list(v) for k, v in grid.items()},
              "restarts": restarts, "seed": config.seed,
              "trial_list": _trial_list(grid, restarts, config.seed)}
    records = _previous_records(output_dir) if resume else {}
    # The grid, seeds and trial list are on disk before the search state and
    # the first trial: a search killed at any point resumes exactly
    # (--resume alone).
    os.makedirs(output_dir, exist_ok=True)
    _write_table(output_dir, records, header)
    oracle, total = _oracle(output_dir, grid, restarts, metric, resume)
    print(f"search: {total} trial(s) over {describe_grid(grid, restarts)}, scored by dev "
          f"{metric}; {len(records)} finished before", flush=True)
    _run_trials(oracle, config, output_dir, parallel, records, header)
    extended = None
    base = [r for r in records.values() if r["score"] is not None
            and r["values"].get("learning_rate") in grid["learning_rate"]]
    if extend and base:
        edge_best = _best(base)
        extended = edge_extension(grid["learning_rate"], edge_best["values"]["learning_rate"])
    if extended is not None:
        # One step past the edge, at the best trial's other values (the
        # question is where the optimum lies along the rate, not a new grid).
        values = dict(edge_best["values"], learning_rate=extended)
        extra = [dict(values, restart=r) if restarts > 1 else values for r in range(restarts)]
        print(f"search: the best rate, {edge_best['values']['learning_rate']:g}, is the "
              f"grid's edge; one step past it: {extended:g}", flush=True)
        header["trial_list"] += [dict(values, seed=config.seed + 1000 * r)
                                 for r in range(restarts)]
        oracle, _ = _oracle(output_dir, grid, restarts, metric, True, extra)
        _run_trials(oracle, config, output_dir, parallel, records, header)
    done = [r for r in records.values() if r["score"] is not None]
    if not done:
        raise UsageError(_every_trial_failed(records))
    best = _best(done)
    optimum = locate_optimum(done, grid["learning_rate"], extended)
    table = _write_table(output_dir, records, header, best, optimum)
    outputs = _adopt(best, output_dir, table)
    return {"best": best, "trials": list(records.values()), "metric": metric, "grid": grid,
            "optimum": optimum, "outputs": outputs}


def _run_trials(oracle, config, output_dir, parallel, records, header):
    """Runs the oracle's trials until it stops; `records` gains each one."""
    restarts, metric = header["restarts"], header["metric"]
    running = {}  # slot -> (process, trial, record)
    stopped = False
    while running or not stopped:
        for slot in range(parallel):
            if slot in running or stopped:
                continue
            trial = oracle.create_trial(f"slot{slot}")
            if trial.status == "IDLE":  # the rest are running in other slots
                break
            if trial.status != "RUNNING":
                stopped = True
                break
            process, record = _start(trial, config, output_dir, slot, parallel)
            print(f"  trial {trial.trial_id}: {record['values']}"
                  + (f" seed {record['seed']}" if restarts > 1 else ""), flush=True)
            running[slot] = (process, trial, record)
        for slot, (process, trial, record) in list(running.items()):
            if process.poll() is None:
                continue
            record = _finish(oracle, trial, record, process.returncode, metric)
            records[record["trial"]] = record
            print(f"  trial {record['trial']}: dev {metric} {record['score']} "
                  f"({record['status'].lower()}, {record['seconds']} s)", flush=True)
            del running[slot]
            _write_table(output_dir, records, header)
        if running:
            time.sleep(0.5)


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
        grid = {field: tuple(_TYPES[field](v) for v in table["grid"][field])
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


def _trial_list(grid, restarts, seed):
    """Every trial of the grid in the order they run: its values and seed."""
    return [dict(zip(grid, values), seed=seed + 1000 * restart)
            for values in itertools.product(*grid.values()) for restart in range(restarts)]


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
             else f"exit without output")
    if len(cause) > 300:
        cause = cause[:297] + "..."
    return (f"every trial failed; the first, trial {first['trial']} ({first['values']}): "
            f"{cause} (log: {log})")


def _write_table(output_dir, records, header, best=None, optimum=None):
    table = {**header, "best_trial": best["trial"] if best else None,
             "optimum": optimum,
             "trials": sorted(records.values(), key=lambda r: int(r["trial"]))}
    atomic_write_text(os.path.join(output_dir, SEARCH_JSON), json.dumps(table, indent=2))
    return table


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


def _run_trial(spec):
    """One trial: fine-tunes with the config the search wrote."""
    from kerasbert.training.configs import FinetuneConfig  # lazy: the trial process only
    from kerasbert.training.finetune import run_finetuning  # lazy: tensorflow

    with open(spec, encoding="utf-8") as f:
        config = FinetuneConfig(**json.load(f))
    config.validate()
    run_finetuning(config)


if __name__ == "__main__":
    try:
        _run_trial(sys.argv[1])
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
