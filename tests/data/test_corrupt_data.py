"""Corrupt shards fail loudly, naming the file and the record index; the
opt-in skip mode counts, logs and stops past its threshold; verify_shards
reports per file."""

import os

import numpy as np
import pytest
import tensorflow as tf

import reader_records as rr
from kerasbert.data.integrity import CorruptRecordLog, EmptyDataError, data_error, from_op_error
from kerasbert.data.reader import pretraining_dataset, verify_shards
from kerasbert.testing.files import tfrecord_offsets

T, P = 32, 5
N = 40  # records per shard


def _shards(folder, metadata=True, gzip_files=False):
    instances = rr.make_instances(2 * N, T, P, seed=9)
    return rr.write_shards(str(folder), instances, num_shards=2, with_metadata=metadata,
                           gzip=gzip_files)


def _read_all(folder, pattern="*.tfrecord", **kwargs):
    kwargs.setdefault("sequence_length", T)
    kwargs.setdefault("max_predictions_per_seq", P)
    ds = pretraining_dataset(str(folder / pattern), 8, repeat=False, shuffle=False,
                             **kwargs)
    return sum(int(b["input_mask"].shape[0]) for b in ds)


def _expect_error(folder, path, index, pattern="*.tfrecord", **kwargs):
    with pytest.raises(tf.errors.OpError) as err:
        _read_all(folder, pattern, **kwargs)
    message = str(err.value)
    assert path in message, message
    assert f"record index {index}:" in message, message
    parsed = from_op_error(err.value)  # back to a Python exception
    assert (parsed.file, parsed.index) == (path, index)
    return message


@pytest.mark.parametrize("metadata", [True, False])
def test_flipped_bytes_mid_file(tmp_path, metadata):
    paths = _shards(tmp_path, metadata)
    data = bytearray(open(paths[1], "rb").read())
    data[tfrecord_offsets(data)[17] + 20] ^= 0xFF  # inside record 17's payload
    open(paths[1], "wb").write(data)
    _expect_error(tmp_path, paths[1], 17)


def test_flipped_length_header(tmp_path):
    paths = _shards(tmp_path)
    data = bytearray(open(paths[0], "rb").read())
    data[tfrecord_offsets(data)[5] + 1] ^= 0x01  # record 5's length
    open(paths[0], "wb").write(data)
    _expect_error(tmp_path, paths[0], 5)


@pytest.mark.parametrize("cut", [7, "header"])
def test_truncated_file(tmp_path, cut):
    paths = _shards(tmp_path, metadata=False)
    data = open(paths[0], "rb").read()
    if cut == "header":
        # Cut inside the last record's length header: TF itself reports NO
        # error here and just stops early.
        data = data[: tfrecord_offsets(data)[-1] + 5]
    else:
        data = data[:-cut]
    open(paths[0], "wb").write(data)
    _expect_error(tmp_path, paths[0], N - 1)


def test_truncated_at_record_boundary_caught_by_metadata_count(tmp_path):
    paths = _shards(tmp_path, metadata=True)
    data = open(paths[0], "rb").read()
    open(paths[0], "wb").write(data[: tfrecord_offsets(data)[30]])  # 30 whole records
    message = _expect_error(tmp_path, paths[0], 30)
    assert "metadata.json" in message


@pytest.mark.parametrize("metadata", [True, False])
def test_garbage_file(tmp_path, metadata):
    # Without metadata the features are probed from the next readable file.
    paths = _shards(tmp_path, metadata)
    open(paths[0], "wb").write(np.random.default_rng(0).bytes(700))
    _expect_error(tmp_path, paths[0], 0)


def test_truncated_gzip(tmp_path):
    paths = _shards(tmp_path, metadata=False, gzip_files=True)
    data = open(paths[1], "rb").read()
    open(paths[1], "wb").write(data[: len(data) // 2])
    with pytest.raises(tf.errors.OpError) as err:
        _read_all(tmp_path, "*.gz")
    assert paths[1] in str(err.value) and "record index" in str(err.value)


def _with_bad_records(paths, bad):
    """Rewrites shard 0 with the records at `bad` indices replaced."""
    instances = rr.make_instances(2 * N, T, P, seed=9)[0::2]
    records = [rr.serialize(x) for x in instances]
    for index in bad:
        if index % 2:
            records[index] = b"not an Example \x00\x01"
        else:  # a valid Example with a feature of the wrong length
            wrong = dict(instances[index])
            wrong["input_ids"] = wrong["input_ids"][:-1]
            records[index] = rr.serialize(wrong)
    rr.write_records(paths[0], records)


@pytest.mark.parametrize("index", [3, 12])
def test_invalid_example(tmp_path, index):
    paths = _shards(tmp_path)
    _with_bad_records(paths, [index])
    message = _expect_error(tmp_path, paths[0], index)
    assert "tf.train.Example" in message


def test_skip_mode_counts_and_fails_past_threshold(tmp_path):
    paths = _shards(tmp_path)
    _with_bad_records(paths, [3, 12, 13])
    log = CorruptRecordLog()
    total = _read_all(tmp_path, on_corrupt="skip", max_corrupt_records=3, corrupt_log=log)
    assert total == 2 * N - 3
    assert sorted((os.path.basename(f), i) for f, i, _ in log.entries) == [
        ("part-00000.tfrecord", 3), ("part-00000.tfrecord", 12), ("part-00000.tfrecord", 13)]

    with pytest.raises(tf.errors.OpError) as err:
        _read_all(tmp_path, on_corrupt="skip", max_corrupt_records=2)
    assert "max_corrupt_records=2" in str(err.value) and paths[0] in str(err.value)


def test_skip_mode_framing_error_counts_rest_of_file(tmp_path):
    paths = _shards(tmp_path, metadata=True)
    data = bytearray(open(paths[1], "rb").read())
    data[tfrecord_offsets(data)[35] + 20] ^= 0xFF
    open(paths[1], "wb").write(data)
    log = CorruptRecordLog()
    assert _read_all(tmp_path, on_corrupt="skip", max_corrupt_records=10,
                     corrupt_log=log) == 2 * N - 5
    assert [i for _, i, _ in log.entries] == [35, 36, 37, 38, 39]
    with pytest.raises(tf.errors.OpError, match="max_corrupt_records=4"):
        _read_all(tmp_path, on_corrupt="skip", max_corrupt_records=4)


def test_verify_shards(tmp_path):
    paths = _shards(tmp_path, metadata=False)
    data = bytearray(open(paths[1], "rb").read())
    data[tfrecord_offsets(data)[22] + 20] ^= 0xFF
    open(paths[1], "wb").write(data)
    reports = verify_shards(str(tmp_path / "*.tfrecord"))
    assert [r.file for r in reports] == paths
    assert reports[0].ok and reports[0].records == N
    assert not reports[1].ok and reports[1].records == 22
    assert reports[1].first_corrupt_index == 22
    # With the schema known, records are parsed against it too.
    _with_bad_records(paths, [6])
    reports = verify_shards(str(tmp_path / "*.tfrecord"), sequence_length=T,
                            max_predictions_per_seq=P)
    assert reports[0].first_corrupt_index == 6 and reports[0].records == N - 1


# --- values out of range: reported like corrupt records ------------------------


def _set_metadata(folder, **fields):
    import json

    path = os.path.join(str(folder), "metadata.json")
    meta = json.load(open(path))
    meta.update(fields)
    json.dump(meta, open(path, "w"))


def _with_value(paths, index, feature, position, value):
    """Rewrites shard 0 with record `index`'s `feature`[position] = value."""
    instances = rr.make_instances(2 * N, T, P, seed=9)[0::2]
    instances[index][feature][position] = value
    rr.write_records(paths[0], instances)


@pytest.mark.parametrize("feature, value, limit, kwargs", [
    ("input_ids", 504, "vocab_size in", {}),  # metadata.json's vocab_size
    ("masked_lm_ids", 900, "vocabulary_size of the model", {"vocab_size": 504}),
    ("masked_lm_positions", T, "max_seq_length", {}),
    ("input_ids", -3, None, {}),
])
def test_value_out_of_range_names_file_record_and_value(tmp_path, feature, value, limit,
                                                        kwargs):
    paths = _shards(tmp_path)
    if limit == "vocab_size in":
        _set_metadata(tmp_path, vocab_size=504)
    _with_value(paths, 11, feature, 1, value)
    message = _expect_error(tmp_path, paths[0], 11, **kwargs)
    assert f"{feature} holds {value}" in message, message
    if limit is None:
        assert "negative" in message
    else:
        assert limit in message
        if limit == "vocab_size in":
            assert "metadata.json" in message and "[0, 504)" in message


def test_ids_in_range_pass(tmp_path):
    _shards(tmp_path)
    _set_metadata(tmp_path, vocab_size=504)  # make_instances draws ids < 504
    assert _read_all(tmp_path, vocab_size=504) == 2 * N


def test_skip_mode_drops_and_counts_out_of_range_records(tmp_path):
    paths = _shards(tmp_path)
    _set_metadata(tmp_path, vocab_size=504)
    _with_value(paths, 4, "input_ids", 2, 5000)
    log = CorruptRecordLog()
    assert _read_all(tmp_path, on_corrupt="skip", max_corrupt_records=1,
                     corrupt_log=log) == 2 * N - 1
    assert [(f, i) for f, i, _ in log.entries] == [(paths[0], 4)]
    assert "input_ids holds 5000" in log.entries[0][2]


def test_model_vocabulary_smaller_than_metadata_is_refused(tmp_path):
    _shards(tmp_path)
    _set_metadata(tmp_path, vocab_size=504)
    with pytest.raises(ValueError, match=r"vocabulary of 504 tokens.*has 400"):
        _read_all(tmp_path, vocab_size=400)


def test_verify_shards_reports_out_of_range_ids(tmp_path):
    paths = _shards(tmp_path)
    _set_metadata(tmp_path, vocab_size=504)
    _with_value(paths, 9, "masked_lm_ids", 0, 777)
    reports = verify_shards(str(tmp_path / "*.tfrecord"))
    assert reports[0].first_corrupt_index == 9 and reports[0].records == N - 1
    assert "masked_lm_ids holds 777" in reports[0].corrupt[0][1]
    assert reports[1].ok


# --- no records: refused, never a repeat that spins -----------------------------


def _first_batch(folder, pattern="*.tfrecord", **kwargs):
    kwargs.setdefault("sequence_length", T)
    kwargs.setdefault("max_predictions_per_seq", P)
    ds = pretraining_dataset(str(folder / pattern), 8, shuffle=False, **kwargs)
    return next(iter(ds))


@pytest.mark.parametrize("case", ["zero_bytes", "metadata_zero", "gzip"])
def test_files_without_records_are_refused_up_front(tmp_path, case):
    pattern = "*.tfrecord.gz" if case == "gzip" else "*.tfrecord"
    rr.write_shards(str(tmp_path), rr.make_instances(2, T, P), num_shards=2,
                    with_metadata=case != "zero_bytes", gzip=case == "gzip")
    for path in tmp_path.glob(pattern):
        rr.write_records(str(path), [], gzip=case == "gzip")
    if case == "metadata_zero":
        _set_metadata(tmp_path, shards={p.name: 0 for p in tmp_path.glob(pattern)})
    with pytest.raises(EmptyDataError, match="no records to read: all 2 files"):
        _first_batch(tmp_path, pattern)


def test_whole_pass_without_records_fails_instead_of_spinning(tmp_path):
    # Every record is corrupt and skipped without a cap: each pass yields
    # nothing, so the repeated dataset must fail, not loop forever.
    paths = _shards(tmp_path)
    for path in paths:
        rr.write_records(path, [b"not an Example"] * N)
    with pytest.raises(tf.errors.OpError) as err:
        _first_batch(tmp_path, on_corrupt="skip", max_corrupt_records=None)
    problem = data_error(err.value)
    assert isinstance(problem, EmptyDataError), str(err.value)[-500:]
    assert "a whole pass over" in str(problem) and paths[0] in str(problem)


@pytest.mark.parametrize("metadata", [True, False])
def test_input_pipeline_without_records(tmp_path, metadata):
    # One file of 40 records is one chunk: pipeline 1 of 2 gets nothing.
    instances = rr.make_instances(N, T, P, seed=3)
    rr.write_shards(str(tmp_path), instances, num_shards=1, with_metadata=metadata)
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1)
    if metadata:  # counts known: refused up front
        with pytest.raises(EmptyDataError, match="no records for input pipeline 1 of 2"):
            _first_batch(tmp_path, input_context=context)
    else:  # found by the first pass
        with pytest.raises(tf.errors.OpError) as err:
            _first_batch(tmp_path, input_context=context)
        assert isinstance(data_error(err.value), EmptyDataError)


def test_file_vanishing_during_a_run_fails_instead_of_spinning(tmp_path):
    # A file that cannot be opened any more (deleted, unmounted) would make
    # the reader retry its open forever; it must fail, naming the file.
    paths = _shards(tmp_path)
    iterator = iter(pretraining_dataset(str(tmp_path / "*.tfrecord"), 8, shuffle=False))
    next(iterator)
    os.remove(paths[1])
    with pytest.raises(tf.errors.NotFoundError, match=paths[1]):
        for _ in range(100):  # the next pass reopens the files
            next(iterator)
