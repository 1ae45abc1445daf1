"""TrainingCheckpoint: every save gets a manifest (size and sha256 of each
file); a damaged newest checkpoint (truncated, flipped bytes, missing
file, any read error) is skipped with one warning line and the previous
one restored; none readable is a one-line UsageError; the input position
restores on its own."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.errors import UsageError
from kerasbert.training.checkpoints import (MANIFEST_SUFFIX, TrainingCheckpoint,
                                            list_checkpoints, verify_checkpoint)


def make_state(directory, with_iterator=True, batch=2):
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8), keras.layers.Dense(3)])
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    step = tf.Variable(0, dtype=tf.int64)
    iterator = iter(tf.data.Dataset.range(1000).batch(batch)) if with_iterator else None
    checkpoint = TrainingCheckpoint(directory, model=model, optimizer=optimizer, step=step,
                                    iterator=iterator, max_to_keep=3)
    return checkpoint, model, step, iterator


@pytest.fixture
def saved(tmp_path):
    """ckpt-2, ckpt-4, ckpt-6 of one training state; weights differ per step."""
    directory = str(tmp_path / "checkpoints")
    checkpoint, model, step, iterator = make_state(directory)
    weights = {}
    for value in (2, 4, 6):
        next(iterator)
        model.set_weights([w + value for w in model.get_weights()])
        step.assign(value)
        checkpoint.info = {"note": {2: "two", 4: "four", 6: "six"}[value]}
        checkpoint.save()
        weights[value] = model.get_weights()[0]
    return directory, weights


def damage(prefix, how):
    data = prefix + ".data-00000-of-00001"
    if how == "truncated_index":
        path, keep = prefix + ".index", 0.5
    elif how == "truncated_data":
        path, keep = data, 0.5
    elif how == "empty_data":
        path, keep = data, 0.0
    elif how in ("flipped_data", "flipped_data_start", "flipped_index"):
        path = prefix + (".index" if how == "flipped_index" else ".data-00000-of-00001")
        blob = bytearray(open(path, "rb").read())
        at = 0 if how == "flipped_data_start" else len(blob) // 2
        for i in range(at, at + 8):
            blob[i] ^= 0xFF
        open(path, "wb").write(bytes(blob))
        return
    elif how == "missing_data":
        os.remove(data)
        return
    blob = open(path, "rb").read()
    open(path, "wb").write(blob[: int(len(blob) * keep)])


def test_save_writes_manifest_and_prunes_with_it(saved):
    directory, _ = saved
    assert [os.path.basename(p) for p in list_checkpoints(directory)] == [
        "ckpt-6", "ckpt-4", "ckpt-2"]
    manifest = json.load(open(os.path.join(directory, "ckpt-6" + MANIFEST_SUFFIX)))
    assert manifest["info"] == {"note": "six"}
    assert sorted(manifest["files"]) == ["ckpt-6.data-00000-of-00001", "ckpt-6.index"]
    for name, entry in manifest["files"].items():
        assert entry["bytes"] == os.path.getsize(os.path.join(directory, name))
        assert len(entry["sha256"]) == 64
    checkpoint, model, step, iterator = make_state(directory)
    step.assign(8)
    checkpoint.save()  # keeps 3: ckpt-2 goes, manifest and all
    assert sorted(n for n in os.listdir(directory) if n.startswith("ckpt-2")) == []
    assert verify_checkpoint(os.path.join(directory, "ckpt-8")) is None


# "flipped_data_start" corrupts the saved input iterator (a string tensor):
# TensorFlow's reader crashes the process on it, so the manifest must catch
# it before TensorFlow reads anything.
@pytest.mark.parametrize("how", ["truncated_index", "truncated_data", "empty_data",
                                 "flipped_data", "flipped_data_start", "flipped_index",
                                 "missing_data"])
def test_damaged_newest_checkpoint_falls_back_with_a_warning(saved, capsys, how):
    directory, weights = saved
    damage(os.path.join(directory, "ckpt-6"), how)
    assert verify_checkpoint(os.path.join(directory, "ckpt-6")) is not None
    checkpoint, model, step, iterator = make_state(directory)
    assert checkpoint.restore_latest() == os.path.join(directory, "ckpt-4")
    assert int(step.numpy()) == 4
    np.testing.assert_array_equal(model.get_weights()[0], weights[4])
    np.testing.assert_array_equal(next(iterator), [4, 5])  # two batches were read
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    assert len(warnings) == 1, warnings
    assert "ckpt-6" in warnings[0] and "falling back to the previous one" in warnings[0]
    assert "ckpt-4" in warnings[0]


def test_without_manifest_any_read_error_falls_back(saved, capsys):
    # A checkpoint from before manifests: TF's own errors (here an
    # IndexError for a truncated data file) also mean "try the previous".
    directory, weights = saved
    prefix = os.path.join(directory, "ckpt-6")
    os.remove(prefix + MANIFEST_SUFFIX)
    damage(prefix, "truncated_data")
    checkpoint, model, step, _ = make_state(directory)
    assert checkpoint.restore_latest() == os.path.join(directory, "ckpt-4")
    np.testing.assert_array_equal(model.get_weights()[0], weights[4])
    assert "ckpt-6 cannot be restored" in capsys.readouterr().err


def test_no_readable_checkpoint_is_one_line_usage_error(saved):
    directory, _ = saved
    for prefix in list_checkpoints(directory):
        damage(prefix, "truncated_index")
    checkpoint, *_ = make_state(directory)
    with pytest.raises(UsageError) as err:
        checkpoint.restore_latest()
    message = str(err.value)
    assert "\n" not in message and "no checkpoint in" in message
    for name in ("ckpt-6", "ckpt-4", "ckpt-2"):
        assert f"{name}.index has" in message


def test_input_position_restores_on_its_own(saved):
    directory, _ = saved
    checkpoint, model, step, _ = make_state(directory, with_iterator=False)
    prefix = checkpoint.restore_latest()
    iterator = iter(tf.data.Dataset.range(1000).batch(2))
    assert checkpoint.restore_iterator(prefix, iterator) is None
    np.testing.assert_array_equal(next(iterator), [6, 7])
    checkpoint.attach_iterator(iterator)
    step.assign(10)
    checkpoint.save()
    fresh = iter(tf.data.Dataset.range(1000).batch(2))
    assert checkpoint.restore_iterator(os.path.join(directory, "ckpt-10"), fresh) is None
    np.testing.assert_array_equal(next(fresh), [8, 9])
    # Another pipeline (other element shapes) does not fit: a reason, no raise.
    other = iter(tf.data.Dataset.range(1000).map(lambda x: (x, x)))
    assert checkpoint.restore_iterator(prefix, other)
