"""`kerasbert pretrain` as users run it (one fresh process per command, from
a working directory other than the data's) when things go wrong: a resume
from elsewhere after the data moved, damaged checkpoints, data without
records, a corrupt record and an out-of-range token id. Each test checks
the exit code, what the user reads and the files left."""

import json
import os
import re
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

from .console import kerasbert, kill_when, ok, one_line_error, start

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "training"))
import pretrain_data as pd  # noqa: E402

from kerasbert.training.checkpoints import list_checkpoints, verify_checkpoint  # noqa: E402
from kerasbert.testing.files import tfrecord_offsets  # noqa: E402

from slow_marks import slow_covered_by  # noqa: E402

TINY = ("--preset", "bert_tiny", "--set", "num_layers=1", "--set", "hidden_dim=32",
        "--set", "num_heads=2", "--set", "intermediate_dim=64",
        "--set", "max_sequence_length=64", "--batch-size", "8", "--learning-rate", "1e-3",
        "--warmup-steps", "1", "--log-every", "1", "--no-progress")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """(vocab.txt, shard folder) written once; tests copy the folder."""
    return pd.make_data(str(tmp_path_factory.mktemp("faults-data")))


def copy_data(made, folder):
    """vocab.txt and shards/ (a copy of the made shards) under `folder`."""
    vocab, shards = made
    os.makedirs(folder, exist_ok=True)
    shutil.copy(vocab, os.path.join(folder, "vocab.txt"))
    shutil.copytree(shards, os.path.join(folder, "shards"))
    return os.path.join(folder, "vocab.txt"), os.path.join(folder, "shards")


def history(run):
    with open(os.path.join(run, "history.jsonl")) as f:
        return [json.loads(line) for line in f]


def model_tensors(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
            if k.startswith("model/")}


# 80 s: two 100-step console runs, one SIGKILLed and resumed from elsewhere after its
# data moved, bit-identical; the default suite SIGKILLs and resumes a console run,
# records data by name and restores the input position.
@slow_covered_by("tests/reliability/test_kills.py::test_kill_pretrain_then_resume",
                 "tests/training/test_resume_checks.py::test_saved_input_from_manifest_else_config_json",
                 "tests/training/test_resume_checks.py::test_same_input_has_no_changes",
                 "tests/training/test_checkpoints.py::test_input_position_restores_on_its_own")
def test_resume_from_another_directory_after_the_data_moved(made, tmp_path):
    """Process 1 trains from directory A with a relative --data and is
    SIGKILLed after a few checkpoints; the data folder moves; process 2
    resumes from directory B with the new (relative) path and ends
    bit-identical to an uninterrupted run."""
    home_a, home_b = tmp_path / "a", tmp_path / "b" / "deeper"
    home_b.mkdir(parents=True)
    copy_data(made, home_a / "corpus")
    # 100 steps: the kill after the first checkpoint lands long before the end.
    args = (*TINY, "--vocab", "corpus/vocab.txt", "--data", "corpus/shards",
            "--checkpoint-every", "4", "--deterministic", "--steps", "100")
    ok(kerasbert("pretrain", *args, "--output-dir", "../reference", cwd=home_a))
    run, reference = tmp_path / "run", tmp_path / "reference"
    process = start("pretrain", *args, "--output-dir", "../run", cwd=home_a)
    assert kill_when(process, lambda: (run / "checkpoints" / "ckpt-4.manifest.json").exists())
    killed_at = int(os.path.basename(list_checkpoints(str(run / "checkpoints"))[0])[5:])
    assert 4 <= killed_at < 100 and not (run / "pretrainer.keras").exists()

    shutil.move(str(home_a / "corpus"), str(tmp_path / "moved-corpus"))
    shutil.rmtree(home_a)
    result = kerasbert("pretrain", *TINY, "--vocab", "../../moved-corpus/vocab.txt",
                       "--data", "../../moved-corpus/shards", "--output-dir", "../../run",
                       "--checkpoint-every", "4", "--deterministic", "--steps", "100",
                       "--resume", cwd=home_b)
    stdout = ok(result)
    assert re.search(r"Resumed from \.\./\.\./run/checkpoints/ckpt-\d+", stdout), stdout
    assert "warning" not in result.stderr, result.stderr[-3000:]

    # Every step logged once, in order, and no resume note: nothing changed.
    assert [r["step"] for r in history(run)] == list(range(1, 101))
    assert [os.path.basename(p) for p in list_checkpoints(str(run / "checkpoints"))] == [
        "ckpt-100", "ckpt-96", "ckpt-92"]
    for name in ("backbone.keras", "pretrainer.keras", "training_curve.png"):
        assert (run / name).stat().st_size > 0, name
    # The data is recorded by name, not by where it was.
    data = json.load(open(run / "config.json"))["data"]
    assert [s["file"] for s in data["shards"]] == [
        n for n in sorted(os.listdir(made[1])) if n != "metadata.json"]
    assert data["start_step"] == 0
    # The same input position: the same weights as never stopping.
    got = model_tensors(str(run / "checkpoints" / "ckpt-100"))
    want = model_tensors(str(reference / "checkpoints" / "ckpt-100"))
    assert got.keys() == want.keys() and got
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


# 41 s: two console runs, two damaged checkpoints passed over with one warning each;
# the default suite falls back over every kind of damage in process.
@slow_covered_by("tests/training/test_checkpoints.py::test_damaged_newest_checkpoint_falls_back_with_a_warning",
                 "tests/training/test_checkpoints.py::test_save_writes_manifest_and_prunes_with_it",
                 "tests/reliability/test_kills.py::test_kill_pretrain_then_resume")
def test_damaged_newest_checkpoints_fall_back(made, tmp_path):
    """ckpt-6 truncated and ckpt-4 with flipped bytes: the resume warns
    about each on one line, restores ckpt-2 and trains on from there."""
    vocab, shards = copy_data(made, tmp_path / "data")
    work = tmp_path / "work"
    work.mkdir()
    args = (*TINY, "--vocab", vocab, "--data", shards, "--output-dir", "run",
            "--checkpoint-every", "2")
    ok(kerasbert("pretrain", *args, "--steps", "6", cwd=work))
    ckpts = work / "run" / "checkpoints"
    index = ckpts / "ckpt-6.index"
    index.write_bytes(index.read_bytes()[: index.stat().st_size // 2])
    data = ckpts / "ckpt-4.data-00000-of-00001"
    blob = bytearray(data.read_bytes())
    for i in range(len(blob) // 2, len(blob) // 2 + 8):
        blob[i] ^= 0xFF
    data.write_bytes(bytes(blob))

    result = kerasbert("pretrain", *args, "--steps", "8", "--resume", cwd=work)
    stdout = ok(result)
    assert "Resumed from run/checkpoints/ckpt-2" in stdout, stdout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 2, result.stderr[-3000:]
    assert "ckpt-6 cannot be restored (ckpt-6.index has" in warnings[0]
    assert "falling back to the previous one, run/checkpoints/ckpt-4" in warnings[0]
    assert "ckpt-4 cannot be restored (ckpt-4.data-00000-of-00001 differs" in warnings[1]
    assert "falling back to the previous one, run/checkpoints/ckpt-2" in warnings[1]
    # Steps 3..6 were trained again and logged once; the damaged
    # checkpoints were written anew and the oldest pruned.
    assert [r["step"] for r in history(work / "run")] == [1, 2, 3, 4, 5, 6, 7, 8]
    kept = list_checkpoints(str(ckpts))
    assert [os.path.basename(p) for p in kept] == ["ckpt-8", "ckpt-6", "ckpt-4"]
    assert all(verify_checkpoint(p) is None for p in kept)


def test_data_without_records_exits_2_at_once(made, tmp_path):
    vocab, shards = copy_data(made, tmp_path / "data")
    meta_path = os.path.join(shards, "metadata.json")
    meta = json.load(open(meta_path))
    for name in meta["shards"]:
        open(os.path.join(shards, name), "wb").close()
        meta["shards"][name] = 0
    meta["num_instances"] = 0
    json.dump(meta, open(meta_path, "w"))
    work = tmp_path / "work"
    work.mkdir()
    result = kerasbert("pretrain", *TINY, "--vocab", vocab, "--data", shards,
                       "--output-dir", "run", "--steps", "5", cwd=work, timeout=120)
    one_line_error(result, f"--data {shards!r}", "no records to read: all 2 files",
                   "part-00000-of-00002.tfrecord")
    assert not (work / "run").exists()


# 14 s: a console pretrain reaching a corrupt record; the default suite refuses data
# without records at the console and turns the reader's record errors into one line.
@slow_covered_by("tests/reliability/test_resume_faults.py::test_data_without_records_exits_2_at_once",
                 "tests/training/test_loop.py::test_data_errors_become_one_line_usage_errors",
                 "tests/data/test_corrupt_data.py::test_flipped_bytes_mid_file")
def test_corrupt_record_is_one_line_naming_file_and_record(made, tmp_path):
    vocab, shards = copy_data(made, tmp_path / "data")
    path = os.path.join(shards, "part-00001-of-00002.tfrecord")
    blob = bytearray(open(path, "rb").read())
    blob[tfrecord_offsets(blob)[123] + 30] ^= 0xFF  # inside record 123's payload
    open(path, "wb").write(bytes(blob))
    work = tmp_path / "work"
    work.mkdir()
    result = kerasbert("pretrain", *TINY, "--vocab", vocab, "--data", shards,
                       "--output-dir", "run", "--steps", "5", cwd=work)
    line = one_line_error(result, f"error: {path} record 123: ",
                          "corrupted or truncated TFRecord data")
    assert "InvalidArgumentError" not in result.stderr and "node" not in line
    assert not (work / "run" / "backbone.keras").exists()
    assert list_checkpoints(str(work / "run" / "checkpoints")) == []


# 14 s: a console pretrain reaching an id past the vocabulary; the default suite refuses
# data without records at the console and out-of-range ids in the reader and finetune.
@slow_covered_by("tests/reliability/test_resume_faults.py::test_data_without_records_exits_2_at_once",
                 "tests/data/test_corrupt_data.py::test_value_out_of_range_names_file_record_and_value",
                 "tests/reliability/test_bad_input.py::test_finetune_refuses_token_ids_outside_the_vocabulary")
def test_token_id_beyond_the_vocabulary_is_one_line(made, tmp_path):
    vocab, shards = copy_data(made, tmp_path / "data")
    vocab_size = json.load(open(os.path.join(shards, "metadata.json")))["vocab_size"]
    path = os.path.join(shards, "part-00000-of-00002.tfrecord")
    records = [r.numpy() for r in tf.data.TFRecordDataset(path)]
    example = tf.train.Example.FromString(records[5])
    example.features.feature["input_ids"].int64_list.value[2] = vocab_size
    records[5] = example.SerializeToString()
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    work = tmp_path / "work"
    work.mkdir()
    result = kerasbert("pretrain", *TINY, "--vocab", vocab, "--data", shards,
                       "--output-dir", "run", "--steps", "5", cwd=work)
    one_line_error(result, f"error: {path} record 5: input_ids holds {vocab_size}, outside "
                   f"[0, {vocab_size}) (vocab_size in {shards}/metadata.json)")
    assert not (work / "run" / "backbone.keras").exists()
