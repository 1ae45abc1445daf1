"""Training checkpoints that resume on exactly the next step.

A checkpoint holds everything the next step depends on:
  - the model's weights and the optimizer's slots, iteration count and (for
    mixed_float16) loss scale;
  - the dropout RNG states: Keras 3 keeps them in `SeedGenerator` variables
    that `tf.train.Checkpoint(model=...)` does not track, so they are added
    explicitly;
  - the step counter and the `tf.data` iterator (a checkpointed iterator
    resumes on exactly the next element, shuffle buffer included).

Saving writes `ckpt-<step>.index` last (TensorFlow's own temp-then-rename),
so a process killed mid-save leaves the previous checkpoints intact; then
`ckpt-<step>.manifest.json` records the size and sha256 of each of the
checkpoint's files, and what the caller says about the checkpoint (`info`,
e.g. the input pipeline's settings its saved position belongs to).
Restoring tries the newest checkpoint first and falls back to older ones,
with a warning line on stderr, when it cannot be read:
a file missing, truncated or changed (found by the manifest BEFORE
TensorFlow reads it: corrupt bytes in a string tensor, such as the saved
input iterator, can crash TensorFlow's reader outright) or any error while
reading. When none can be read, a UsageError lists why.

Multi-worker: every worker must call `save` (variables are synchronised by
collectives), but only the chief writes to the run directory; the others
write to a private temporary directory that is emptied after each save.
"""

import glob
import json
import os
import re
import shutil
import sys
import tempfile

import tensorflow as tf

from kerasbert.errors import UsageError
from kerasbert.io_utils import atomic_write_json
from kerasbert.io_utils import file_sha256

_CKPT_RE = re.compile(r"ckpt-(\d+)\.index$")
_SHARD_RE = re.compile(r"\.data-(\d+)-of-(\d+)$")
MANIFEST_SUFFIX = ".manifest.json"


def seed_states(model):
    """The model's RNG state variables (in `variables`, not in `weights`)."""
    weight_ids = {id(v) for v in model.weights}
    return [v.value for v in model.variables
            if id(v) not in weight_ids and "seed_generator" in v.path]


def list_checkpoints(directory):
    """Checkpoint prefixes in `directory`, newest (highest step) first."""
    found = []
    for index_file in glob.glob(os.path.join(glob.escape(directory), "ckpt-*.index")):
        match = _CKPT_RE.search(os.path.basename(index_file))
        if match:
            found.append((int(match.group(1)), index_file[: -len(".index")]))
    return [prefix for _, prefix in sorted(found, reverse=True)]


def checkpoint_files(prefix):
    """The files of a checkpoint: its .index and .data-* shards."""
    shards = glob.glob(glob.escape(prefix) + ".data-*-of-*")
    return [prefix + ".index"] + sorted(shards)


def write_manifest(prefix, info=None):
    """Writes `<prefix>.manifest.json`: {"files": {name: {bytes, sha256}},
    "info": info}."""
    files = {os.path.basename(path): {"bytes": os.path.getsize(path), "sha256": file_sha256(path)}
             for path in checkpoint_files(prefix)}
    atomic_write_json(prefix + MANIFEST_SUFFIX, {"files": files, "info": info})


def read_manifest(prefix):
    """The manifest dict of a checkpoint, or None (none, or unreadable)."""
    try:
        with open(prefix + MANIFEST_SUFFIX, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def verify_checkpoint(prefix):
    """None when the checkpoint's files are whole, else a short reason.

    With a manifest: every file it lists exists with its size and sha256.
    Without one (a run from before manifests, or killed between the
    checkpoint and its manifest): the index is not empty and every data
    shard its names promise exists."""
    manifest_path = prefix + MANIFEST_SUFFIX
    if os.path.exists(manifest_path):
        manifest = read_manifest(prefix)
        if manifest is None or not isinstance(manifest.get("files"), dict):
            return f"{os.path.basename(manifest_path)} is unreadable"
        folder = os.path.dirname(prefix)
        for name, expected in sorted(manifest["files"].items()):
            path = os.path.join(folder, name)
            if not os.path.exists(path):
                return f"{name} is missing"
            size = os.path.getsize(path)
            if size != expected["bytes"]:
                return f"{name} has {size} bytes, {expected['bytes']} were written"
            if file_sha256(path) != expected["sha256"]:
                return f"{name} differs from what was written (sha256 mismatch)"
        return None
    files = checkpoint_files(prefix)
    if not os.path.exists(files[0]) or os.path.getsize(files[0]) == 0:
        return f"{os.path.basename(files[0])} is missing or empty"
    shards = [_SHARD_RE.search(f) for f in files[1:]]
    expected = int(shards[0].group(2)) if shards else 1
    if len(shards) != expected:
        return f"{expected} data shard(s) expected, {len(shards)} found"
    return None


def _short(error):
    """The first line of an exception's message, without TensorFlow's
    `{{function_node ...}}` and `[Op:...]` decorations."""
    text = str(error).strip()
    text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", text)
    text = re.sub(r"\s*\[Op:[^\]]*\].*", "", text)
    line = text.splitlines()[0].strip() if text else ""
    return f"{type(error).__name__}: {line}" if line else type(error).__name__


class TrainingCheckpoint:
    """Saves and restores a training state (see module doc).

    Args:
        directory: the run's `checkpoints/` folder.
        model, optimizer: Keras objects built in the strategy's scope.
        step: int64 `tf.Variable`, optimizer steps done.
        iterator: the host `tf.data` iterator (None: not saved).
        is_chief: False on non-chief workers (writes go to a temp dir).
        max_to_keep: checkpoints kept on disk.
        info: JSON-able facts saved in each checkpoint's manifest (the
            attribute `info` can be set later); `read_manifest(prefix)
            ["info"]` gives them back.

    Example:

    >>> import os, tempfile
    >>> import keras
    >>> import numpy as np
    >>> import tensorflow as tf
    >>> from kerasbert.training import TrainingCheckpoint
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> optimizer = keras.optimizers.SGD(0.1)
    >>> step = tf.Variable(3, dtype=tf.int64)
    >>> checkpoint = TrainingCheckpoint(os.path.join(tempfile.mkdtemp(), "checkpoints"),
    ...                                 model=model, optimizer=optimizer, step=step)
    >>> os.path.basename(checkpoint.save())                  # named by the step
    'ckpt-3'
    >>> _ = step.assign(7)
    >>> os.path.basename(checkpoint.restore_latest()), int(step.numpy())
    ('ckpt-3', 3)
    """

    def __init__(self, directory, *, model, optimizer, step, iterator=None,
                 is_chief=True, max_to_keep=3, info=None):
        self.directory = directory
        self.info = info
        self.is_chief = is_chief
        self.step = step
        self._objects = dict(model=model, optimizer=optimizer, step=step,
                             seeds=seed_states(model))
        if iterator is not None:
            self._objects["iterator"] = iterator
        self.checkpoint = tf.train.Checkpoint(**self._objects)
        # The chief's folder is made by the first save: a run refused before
        # its first step leaves no empty checkpoints/ behind.
        self._write_dir = directory if is_chief else tempfile.mkdtemp(prefix="kerasbert-worker-")
        self.max_to_keep = max_to_keep

    def save(self):
        """Writes ckpt-<step> and its manifest; returns its prefix (chief)
        or None."""
        step = int(self.step.numpy())
        os.makedirs(self._write_dir, exist_ok=True)
        prefix = self.checkpoint.write(os.path.join(self._write_dir, f"ckpt-{step}"))
        if not self.is_chief:
            shutil.rmtree(self._write_dir, ignore_errors=True)
            os.makedirs(self._write_dir, exist_ok=True)
            return None
        write_manifest(prefix, self.info)
        for old in list_checkpoints(self.directory)[self.max_to_keep:]:
            for path in glob.glob(glob.escape(old) + ".*"):
                os.remove(path)
        return prefix

    def restore_latest(self, restore_iterator=True):
        """Restores the newest readable checkpoint; returns its prefix or None.

        A checkpoint that cannot be read (see the module doc) is skipped
        with a warning line on stderr, falling back to the previous one;
        when there are checkpoints but none can be read, raises UsageError
        naming each and why. `restore_iterator=False` leaves the input
        iterator where it is (a resume whose input pipeline changed).
        """
        reader = self.checkpoint
        if not restore_iterator and "iterator" in self._objects:
            reader = tf.train.Checkpoint(**{k: v for k, v in self._objects.items()
                                            if k != "iterator"})
        candidates = list_checkpoints(self.directory)
        errors = []
        for i, prefix in enumerate(candidates):
            problem = verify_checkpoint(prefix)
            if problem is None:
                try:
                    status = reader.read(prefix)
                    status.assert_existing_objects_matched()
                    status.expect_partial()
                    return prefix
                except Exception as err:  # noqa: BLE001 - any read error: try the previous one
                    problem = _short(err)
            errors.append(f"{os.path.basename(prefix)}: {problem}")
            older = candidates[i + 1] if i + 1 < len(candidates) else None
            then = (f"falling back to the previous one, {older}" if older
                    else "no older checkpoint to fall back to")
            print(f"warning: checkpoint {prefix} cannot be restored ({problem}); {then}.",
                  file=sys.stderr, flush=True)
        if candidates:
            raise UsageError(
                f"no checkpoint in {self.directory} can be restored ({'; '.join(errors)}); "
                "remove them to start over, or choose a new --output-dir.")
        return None

    def attach_iterator(self, iterator):
        """Saves `iterator` (the host tf.data iterator) with the next
        checkpoints."""
        self._objects["iterator"] = iterator
        self.checkpoint = tf.train.Checkpoint(**self._objects)

    @staticmethod
    def restore_iterator(prefix, iterator):
        """Restores only the input position saved in checkpoint `prefix`
        into `iterator` (a fresh iterator of the same pipeline). Returns
        None, or why it could not (then make a new iterator: this one may
        be half restored)."""
        try:
            status = tf.train.Checkpoint(iterator=iterator).read(prefix)
            status.expect_partial()
            reader = tf.train.load_checkpoint(prefix)
            if not any(key.startswith("iterator/") for key in reader.get_variable_to_shape_map()):
                return "it holds no input position"
        except Exception as err:  # noqa: BLE001 - a pipeline that changed fails in many ways
            return _short(err)
        return None

    def close(self):
        if not self.is_chief:
            shutil.rmtree(self._write_dir, ignore_errors=True)
