"""`kerasbert pretrain --resume` and a new run's folder: the run's
config.json and checkpoints against this invocation. Another architecture
or other data is refused, naming what differs; a new batch size or
sequence length (BERT's second phase) is a change the input restarts for.
"""

import json
import os
import sys

from kerasbert import runs
from kerasbert.errors import UsageError
from kerasbert.training.checkpoints import list_checkpoints
from kerasbert.training.checkpoints import read_manifest


def check_run_dir(config):
    """RUN/checkpoints: a run with checkpoints is continued only with
    --resume (a --resume without any starts from step 0, with a note)."""
    ckpt_dir = runs.run_path(config.output_dir, runs.CHECKPOINTS)
    existing = list_checkpoints(ckpt_dir) if os.path.isdir(ckpt_dir) else []
    if existing and not config.resume:
        raise UsageError(f"{config.output_dir} already holds checkpoints ({existing[0]}); "
                         "pass --resume to continue it, or choose a new --output-dir.")
    if config.resume and not existing:
        print(f"--resume: no checkpoint in {ckpt_dir} yet; starting from step 0.",
              file=sys.stderr)
    # The folder is made by the first checkpoint (TrainingCheckpoint.save): a
    # run refused before its first step leaves nothing.
    return ckpt_dir


# --- resume: the run's config.json against this invocation -------------------

# Backbone config entries that are not architecture.
_NOT_ARCHITECTURE = ("name", "trainable", "dtype")


def previous_config(config, ckpt_dir):
    """The run's config.json when --resume will restore a checkpoint, else
    None (a new run, or a run killed before its first checkpoint)."""
    path = runs.run_path(config.output_dir, runs.CONFIG)
    if not (config.resume and list_checkpoints(ckpt_dir) and os.path.exists(path)):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as err:
        raise UsageError(f"--resume: {path} cannot be read ({err}); it describes the run "
                         "to resume, so it must be intact.") from None


def _short_value(value):
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def check_same_architecture(previous, backbone, objectives, output_dir):
    """UsageError naming every architecture value (backbone config, family,
    pretraining objectives) that differs between the run's config.json and
    this invocation: a checkpoint only fits the model it was saved from."""
    if previous is None:
        return
    given = json.loads(json.dumps(backbone.get_config()))
    run = previous.get("backbone") or {}
    diffs = []
    if previous.get("backbone_class") not in (None, type(backbone).__name__):
        diffs.append(f"backbone: run {previous['backbone_class']} vs given "
                     f"{type(backbone).__name__}")
    for key in sorted(set(run) | set(given)):
        if key in _NOT_ARCHITECTURE or run.get(key) == given.get(key):
            continue
        diffs.append(f"{key}: run {_short_value(run.get(key))} vs given "
                     f"{_short_value(given.get(key))}")
    if previous.get("objectives") not in (None, list(objectives)):
        diffs.append(f"objectives: run {'+'.join(previous['objectives'])} vs given "
                     f"{'+'.join(objectives)}")
    if diffs:
        raise UsageError(
            f"--resume: {output_dir} was trained with another architecture than the one "
            f"given ({'; '.join(diffs)}); resume with the run's --preset and --set values, "
            "or start a new run (--init-from takes weights across phases).")


def _shards_differ(run, given):
    """One phrase naming the first difference between two describe_shards
    lists, or None when they are the same."""
    if run == given:
        return None
    if len(run) != len(given):
        return f"the run read {len(run)} files, the given data has {len(given)}"
    for old, new in zip(run, given):
        if old["file"] != new["file"]:
            return f"the run read {old['file']} where the given data has {new['file']}"
        for key in ("bytes", "records"):
            if old.get(key) != new.get(key):
                return (f"{old['file']} had {old.get(key)} {key} in the run, the given one "
                        f"has {new.get(key)}")
    return "the files differ"


def saved_input(prefix, previous):
    """The input settings the input position in checkpoint `prefix` belongs
    to: {batch_size, sequence_length, max_predictions_per_seq, workers,
    shards, seed, start_step} from its manifest, else (a checkpoint from
    before manifests) from the run's config.json `previous`, else None."""

    info = (read_manifest(prefix) or {}).get("info") if prefix else None
    if isinstance(info, dict) and "batch_size" in info:
        return info
    if previous is None:
        return None
    run, data = previous.get("pretrain") or {}, previous.get("data") or {}
    return {"batch_size": run.get("batch_size"),
            "max_seq_length": data.get("max_seq_length"),
            "max_predictions_per_seq": data.get("max_predictions_per_seq"),
            "workers": (previous.get("strategy") or {}).get("workers"),
            "shards": data.get("shards"), "seed": data.get("seed"),
            "start_step": data.get("start_step")}


def resume_changes(saved, config, sequence_length, num_predictions, shards, num_workers=1):
    """{name: [run value, given value]} of the input changes --resume
    accepts (batch size, sequence length, masked positions, number of
    input pipelines) between `saved` (`saved_input`) and this invocation;
    they change the shape of the batches, so the saved input position
    cannot be reused.

    Other data (other shards, not just moved) at the same sequence length
    is refused: the saved position means nothing in it. New data with a
    new sequence length is the second phase of a run (BERT's 128 -> 512
    tokens) and is accepted as a change."""
    if saved is None:
        return {}
    changes = {}
    for key, new in (("batch_size", config.batch_size), ("max_seq_length", sequence_length),
                     ("max_predictions_per_seq", num_predictions), ("workers", num_workers)):
        old = saved.get(key)
        if old is not None and old != new:
            changes[key] = [old, new]
    new_shape = {"max_seq_length", "max_predictions_per_seq"} & changes.keys()
    if saved.get("shards") is not None and not new_shape:
        problem = _shards_differ(saved["shards"], shards)
        if problem:
            raise UsageError(
                f"--resume: --data {config.data} is not the data this run was trained on "
                f"({problem}); pass the run's data (it may have moved: any path to it "
                "works), or start a new run with --init-from.")
    return changes
