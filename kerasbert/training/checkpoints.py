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
so a process killed mid-save leaves the previous checkpoints intact.
Restoring tries the newest checkpoint first and falls back to older ones,
with a warning, when a file is unreadable or corrupt.

Multi-worker: every worker must call `save` (variables are synchronised by
collectives), but only the chief writes to the run directory; the others
write to a private temporary directory that is emptied after each save.
"""

import glob
import os
import re
import shutil
import tempfile
import warnings

import tensorflow as tf

_CKPT_RE = re.compile(r"ckpt-(\d+)\.index$")


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


class TrainingCheckpoint:
    """Saves and restores a training state (see module doc).

    Args:
        directory: the run's `checkpoints/` folder.
        model, optimizer: Keras objects built in the strategy's scope.
        step: int64 `tf.Variable`, optimizer steps done.
        iterator: the host `tf.data` iterator (None: not saved).
        is_chief: False on non-chief workers (writes go to a temp dir).
        max_to_keep: checkpoints kept on disk.
    """

    def __init__(self, directory, *, model, optimizer, step, iterator=None,
                 is_chief=True, max_to_keep=3):
        self.directory = directory
        self.is_chief = is_chief
        self.step = step
        objects = dict(model=model, optimizer=optimizer, step=step,
                       seeds=seed_states(model))
        if iterator is not None:
            objects["iterator"] = iterator
        self.checkpoint = tf.train.Checkpoint(**objects)
        self._write_dir = directory if is_chief else tempfile.mkdtemp(prefix="kerasbert-worker-")
        os.makedirs(self._write_dir, exist_ok=True)
        self.max_to_keep = max_to_keep

    def save(self):
        """Writes ckpt-<step>; returns its prefix (chief) or None."""
        step = int(self.step.numpy())
        prefix = self.checkpoint.write(os.path.join(self._write_dir, f"ckpt-{step}"))
        if not self.is_chief:
            shutil.rmtree(self._write_dir, ignore_errors=True)
            os.makedirs(self._write_dir, exist_ok=True)
            return None
        for old in list_checkpoints(self.directory)[self.max_to_keep:]:
            for path in glob.glob(glob.escape(old) + ".*"):
                os.remove(path)
        return prefix

    def restore_latest(self):
        """Restores the newest readable checkpoint; returns its prefix or None.

        Corrupt or unreadable checkpoints are skipped with a warning; when
        there are checkpoints but none can be read, raises RuntimeError.
        """
        candidates = list_checkpoints(self.directory)
        errors = []
        for prefix in candidates:
            try:
                status = self.checkpoint.read(prefix)
                status.assert_existing_objects_matched()
                status.expect_partial()
                return prefix
            except (tf.errors.OpError, ValueError, AssertionError) as err:
                first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                errors.append(f"{prefix}: {first_line}")
                warnings.warn(f"Checkpoint {prefix} could not be restored ({first_line}); "
                              "falling back to the previous one.", stacklevel=2)
        if candidates:
            raise RuntimeError("No checkpoint in {} could be restored:\n  {}".format(
                self.directory, "\n  ".join(errors)))
        return None

    def close(self):
        if not self.is_chief:
            shutil.rmtree(self._write_dir, ignore_errors=True)
