"""`kerasbert pretrain` as users run it (one fresh process per command, from a
working directory other than the data's) when things go wrong: data without
records, a corrupt record and an out-of-range token id. Each test checks
the exit code, what the user reads and the files left."""

import json
import os
import shutil
import struct
import sys

import pytest
import tensorflow as tf

from .console import kerasbert, one_line_error

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "training"))
import pretrain_data as pd  # noqa: E402

from kerasbert.training.checkpoints import list_checkpoints  # noqa: E402

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


def _offsets(data):
    offsets, at = [], 0
    while at < len(data):
        offsets.append(at)
        at += 16 + struct.unpack("<Q", data[at:at + 8])[0]
    return offsets


def test_corrupt_record_is_one_line_naming_file_and_record(made, tmp_path):
    vocab, shards = copy_data(made, tmp_path / "data")
    path = os.path.join(shards, "part-00001-of-00002.tfrecord")
    blob = bytearray(open(path, "rb").read())
    blob[_offsets(blob)[123] + 30] ^= 0xFF  # inside record 123's payload
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
