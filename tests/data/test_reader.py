"""pretraining_dataset: names, dtypes, shapes, values, metadata checks, gzip,
sharding, determinism, our writer's output (tf-models-official and
tf.distribute interop: test_reader_interop.py)."""

import numpy as np
import pytest
import tensorflow as tf

import reader_records as rr
from kerasbert.data.reader import pretraining_dataset

T, P = 32, 5


def _collect(ds):
    return [{k: v.numpy() for k, v in batch.items()} for batch in ds]


def _rows(batches, key="input_word_ids"):
    return [tuple(row) for b in batches for row in b[key]]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("vocab") / "vocab.txt")
    rr.write_vocab(path)
    return path


def test_outputs_match_file(tmp_path, vocab):
    instances = rr.make_instances(20, T, P, seed=3)
    rr.write_shards(str(tmp_path), instances, num_shards=1, vocab_file=vocab)
    ds = pretraining_dataset(str(tmp_path / "*.tfrecord"), 8, shuffle=False,
                             repeat=False, deterministic=True, vocab_file=vocab,
                             sequence_length=T, max_predictions_per_seq=P)
    batches = _collect(ds)
    assert [len(b["input_mask"]) for b in batches] == [8, 8, 4]  # remainder kept
    dtypes = {k: v.dtype for k, v in batches[0].items()}
    assert dtypes == {
        "input_word_ids": np.int32, "input_mask": np.int32, "input_type_ids": np.int32,
        "masked_lm_positions": np.int32, "masked_lm_ids": np.int32,
        "masked_lm_weights": np.float32, "next_sentence_labels": np.int32,
    }
    assert batches[0]["input_word_ids"].shape == (8, T)
    assert batches[0]["masked_lm_positions"].shape == (8, P)
    assert batches[0]["next_sentence_labels"].shape == (8,)
    got = {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}
    for file_name, model_name in (("input_ids", "input_word_ids"),
                                  ("segment_ids", "input_type_ids"),
                                  ("input_mask", "input_mask"),
                                  ("masked_lm_positions", "masked_lm_positions"),
                                  ("masked_lm_weights", "masked_lm_weights")):
        np.testing.assert_array_equal(got[model_name], [i[file_name] for i in instances])
    np.testing.assert_array_equal(got["next_sentence_labels"],
                                  [i["next_sentence_labels"][0] for i in instances])


def test_repeat_batches_are_static_and_full(tmp_path):
    rr.write_shards(str(tmp_path), rr.make_instances(30, T, P), num_shards=3)
    ds = pretraining_dataset(str(tmp_path / "*.tfrecord"), 8, seed=0,
                             shuffle_buffer_size=64)
    assert ds.element_spec["input_word_ids"].shape.as_list() == [8, T]
    assert ds.element_spec["next_sentence_labels"].shape.as_list() == [8]
    seen = [b["input_mask"].shape[0] for b in ds.take(10)]  # beyond one epoch
    assert seen == [8] * 10


def test_no_sentence_label_files(tmp_path):
    rr.write_shards(str(tmp_path), rr.make_instances(10, T, P, nsp=False), num_shards=1)
    batch = next(iter(pretraining_dataset(str(tmp_path / "*.tfrecord"), 4,
                                          shuffle_buffer_size=8)))
    assert "next_sentence_labels" not in batch


@pytest.mark.parametrize("argument,field,value,stored", [
    ("sequence_length", "max_seq_length", 64, T),
    ("max_predictions_per_seq", "max_predictions_per_seq", 7, P)])
def test_metadata_size_mismatch_names_both_values(tmp_path, argument, field, value, stored):
    rr.write_shards(str(tmp_path), rr.make_instances(4, T, P), num_shards=1)
    with pytest.raises(ValueError) as err:
        pretraining_dataset(str(tmp_path / "*.tfrecord"), 2, **{argument: value})
    message = str(err.value)  # names metadata.json's field
    assert field in message and str(value) in message and str(stored) in message


def test_metadata_vocab_mismatch(tmp_path, vocab):
    rr.write_shards(str(tmp_path / "d"), rr.make_instances(4, T, P), num_shards=1,
                    vocab_file=vocab)
    other = tmp_path / "other.txt"
    other.write_text(open(vocab).read() + "extra\n")
    with pytest.raises(ValueError, match="vocab_size") as err:
        pretraining_dataset(str(tmp_path / "d" / "*.tfrecord"), 2, vocab_file=str(other))
    assert "505" in str(err.value) and "504" in str(err.value)
    same_size = tmp_path / "same.txt"
    same_size.write_text(open(vocab).read().replace("w7\n", "w7x\n"))
    with pytest.raises(ValueError, match="vocab_sha256"):
        pretraining_dataset(str(tmp_path / "d" / "*.tfrecord"), 2, vocab_file=str(same_size))
    pretraining_dataset(str(tmp_path / "d" / "*.tfrecord"), 2, vocab_file=vocab)  # ok


def test_files_without_metadata_need_sizes(tmp_path):
    rr.write_shards(str(tmp_path), rr.make_instances(6, T, P), num_shards=2,
                    with_metadata=False)
    with pytest.raises(ValueError, match="sequence_length and max_predictions_per_seq"):
        pretraining_dataset(str(tmp_path / "*.tfrecord"), 2)
    ds = pretraining_dataset([str(p) for p in sorted(tmp_path.glob("*.tfrecord"))], 2,
                             sequence_length=T, max_predictions_per_seq=P, repeat=False)
    assert sum(len(b["input_mask"]) for b in _collect(ds)) == 6


@pytest.mark.parametrize("with_metadata", [True, False])
def test_gzip(tmp_path, with_metadata):
    instances = rr.make_instances(12, T, P, seed=5)
    rr.write_shards(str(tmp_path), instances, num_shards=2, gzip=True,
                    with_metadata=with_metadata)
    ds = pretraining_dataset(str(tmp_path / "*.gz"), 4, repeat=False, shuffle=False,
                             sequence_length=T, max_predictions_per_seq=P)
    assert sorted(_rows(_collect(ds))) == sorted(tuple(i["input_ids"]) for i in instances)


@pytest.mark.parametrize("num_files,num_instances", [(4, 40), (1, 300)])
def test_input_context_shards_disjoint(tmp_path, num_files, num_instances):
    # 4 files -> files split; 1 file -> records split (chunks of 64).
    instances = rr.make_instances(num_instances, T, P, seed=7)
    rr.write_shards(str(tmp_path), instances, num_shards=num_files)
    seen = []
    for pipeline in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline,
                                         num_replicas_in_sync=2)
        ds = pretraining_dataset(str(tmp_path / "*.tfrecord"), 4, input_context=ctx,
                                 repeat=False, seed=1)
        batches = _collect(ds)
        assert batches[0]["input_mask"].shape[0] == 2  # per-replica batch
        seen.append(set(_rows(batches)))
    assert seen[0] and seen[1] and not seen[0] & seen[1]
    assert seen[0] | seen[1] == {tuple(i["input_ids"]) for i in instances}


def test_deterministic_mode_reproducible(tmp_path, vocab):
    rr.write_shards(str(tmp_path), rr.make_instances(200, T, P, seed=2), num_shards=3,
                    vocab_file=vocab)

    def run(seed):
        ds = pretraining_dataset(str(tmp_path / "*.tfrecord"), 16, seed=seed,
                                 deterministic=True, dynamic_masking=True,
                                 vocab_file=vocab, shuffle_buffer_size=50)
        return _collect(ds.take(14))  # crosses epochs (200 records)

    first, second, other = run(11), run(11), run(12)
    for a, b in zip(first, second):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    assert any(not np.array_equal(a["input_word_ids"], c["input_word_ids"])
               for a, c in zip(first, other))


def test_no_masking_files_need_dynamic_masking(tmp_path, vocab):
    rr.write_shards(str(tmp_path), rr.make_instances(4, T, P, masked=False), num_shards=1)
    with pytest.raises(ValueError, match="dynamic_masking=True"):
        pretraining_dataset(str(tmp_path / "*.tfrecord"), 2)
    with pytest.raises(ValueError, match="vocab_file"):
        pretraining_dataset(str(tmp_path / "*.tfrecord"), 2, dynamic_masking=True)
    batch = next(iter(pretraining_dataset(str(tmp_path / "*.tfrecord"), 2,
                                          dynamic_masking=True, vocab_file=vocab,
                                          shuffle_buffer_size=8)))
    assert batch["masked_lm_positions"].shape == (2, P)


def test_missing_files_error(tmp_path):
    with pytest.raises(ValueError, match="No files match"):
        pretraining_dataset(str(tmp_path / "*.tfrecord"), 2)


@pytest.mark.parametrize("masking", [True, False])
def test_reads_our_writer_output_folder(tmp_path, vocab, masking):
    """End to end with kerasbert.data.writer (static masks, or --no-masking
    + gzip read with dynamic masking); the shard folder is the pattern."""
    writer = pytest.importorskip("kerasbert.data.writer")
    rng = np.random.default_rng(1)
    lines = []
    for _ in range(10):
        lines += [" ".join(rng.choice(rr.WORDS, size=rng.integers(3, 12))) for _ in range(6)]
        lines.append("")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    meta = writer.create_pretraining_data(
        [str(corpus)], vocab, str(out), sequence_length=T, max_predictions_per_seq=P,
        dupe_factor=1, num_shards=2, masking=masking, gzip=not masking, progress=False)
    ds = pretraining_dataset(str(out), 4, repeat=False, vocab_file=vocab,
                             dynamic_masking=not masking)
    batches = _collect(ds)
    assert sum(len(b["input_mask"]) for b in batches) == meta["num_instances"] > 0
    assert batches[0]["masked_lm_positions"].shape[1] == P
    assert batches[0]["input_word_ids"].shape[1] == T


def test_checkpointed_iterator_follows_the_data_to_its_new_place(tmp_path, monkeypatch):
    """A saved input position holds no path: restored into the pipeline of
    the same shards in another folder (relative --data, another working
    directory, the old folder gone), it goes on with exactly the batches
    the first iterator would have given."""
    import shutil

    old, new = tmp_path / "old" / "shards", tmp_path / "new" / "moved"
    rr.write_shards(str(old), rr.make_instances(150, T, P, seed=4), num_shards=3)

    def dataset():  # relative to the working directory, as a user types it
        return pretraining_dataset("shards" if (tmp_path / "old").exists() else "moved", 8,
                                   seed=5, deterministic=True, shuffle_buffer_size=40)

    monkeypatch.chdir(tmp_path / "old")
    iterator = iter(dataset())
    for _ in range(7):  # past the first pass over the 150 records
        next(iterator)
    prefix = tf.train.Checkpoint(iterator=iterator).write(str(tmp_path / "ckpt" / "it"))
    expected = _collect([next(iterator) for _ in range(30)])
    del iterator  # process 1 ends

    shutil.copytree(old, new)
    shutil.rmtree(tmp_path / "old")
    monkeypatch.chdir(tmp_path / "new")
    restored = iter(dataset())
    tf.train.Checkpoint(iterator=restored).read(prefix).assert_consumed()
    got = _collect([next(restored) for _ in range(30)])
    for a, b in zip(expected, got):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    # Nothing in the saved state names the old place.
    data = b"".join(p.read_bytes() for p in (tmp_path / "ckpt").iterdir())
    assert str(old).encode() not in data and b"shards/part-" not in data
