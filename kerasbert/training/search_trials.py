"""The trials of `kerasbert finetune --search` (search.py): a KerasTuner
oracle walking the grid, one fine-tuning process per trial (`python -m
kerasbert.training.search_trials SPEC`, this module's entry), N of them at
once, each with its own GPU or none, and search.json rewritten as each one
finishes.
"""

import dataclasses
import itertools
import json
import os
import subprocess
import sys
import time

from kerasbert.errors import UsageError
from kerasbert.io_utils import atomic_write_text

SEARCH_DIR, TRIALS_DIR = "search", "trials"
SEARCH_JSON, SEARCH_PLOT = "search.json", "search.png"


def _hyperparameters(grid, restarts):
    import keras_tuner  # lazy: the search's bookkeeping only

    hp = keras_tuner.HyperParameters()
    for field, values in grid.items():
        hp.Choice(field, list(values), ordered=True)
    if restarts > 1:
        hp.Choice("restart", list(range(restarts)), ordered=True)
    return hp


def grid_oracle(directory, grid, restarts, metric, resume, extra=()):
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
        # A failed trial runs again: KerasTuner's retry queue (1.4.8) hands
        # it out before any new combination, under its own id and folder.
        oracle._retry_queue.extend(t.trial_id for t in oracle.trials.values()
                                   if t.status == keras_tuner.engine.trial.TrialStatus.FAILED)
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


def start_trial(trial, config, output_dir, slot, parallel):
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
    process = subprocess.Popen([sys.executable, "-m", "kerasbert.training.search_trials", spec],
                               stdout=log, stderr=subprocess.STDOUT,
                               env=_trial_env(slot, parallel), preexec_fn=_die_with_parent)
    log.close()
    return process, {"trial": trial.trial_id, "values": values, "restart": int(restart),
                     "seed": trial_config.seed, "folder": folder, "started": time.time()}


def finish_trial(oracle, trial, record, returncode, metric):
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


def run_trials(oracle, config, output_dir, parallel, records, header):
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
            process, record = start_trial(trial, config, output_dir, slot, parallel)
            print(f"  trial {trial.trial_id}: {record['values']}"
                  + (f" seed {record['seed']}" if restarts > 1 else ""), flush=True)
            running[slot] = (process, trial, record)
        for slot, (process, trial, record) in list(running.items()):
            if process.poll() is None:
                continue
            record = finish_trial(oracle, trial, record, process.returncode, metric)
            records[record["trial"]] = record
            print(f"  trial {record['trial']}: dev {metric} {record['score']} "
                  f"({record['status'].lower()}, {record['seconds']} s)", flush=True)
            del running[slot]
            write_table(output_dir, records, header)
        if running:
            time.sleep(0.5)


def write_table(output_dir, records, header, best=None, optimum=None):
    table = {**header, "best_trial": best["trial"] if best else None,
             "optimum": optimum,
             "trials": sorted(records.values(), key=lambda r: int(r["trial"]))}
    atomic_write_text(os.path.join(output_dir, SEARCH_JSON), json.dumps(table, indent=2))
    return table


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
