"""The Beam driver of create-pretraining-data writes what the local writer
writes: the same multiset of tf.train.Examples, byte for byte, for every
objective, in-process and multi-process; readers (ours, Model Garden's)
read it; misconfigured runners, failed pipelines and existing output are
refused without leaving a readable half-result."""

import collections
import io
import json
import os
import subprocess
import sys

import pytest

from kerasbert.data import beam_writer
from kerasbert.data import writer
from kerasbert.errors import UsageError

sys.path.insert(0, os.path.dirname(__file__))
from pretrain_fixtures import read_shards  # noqa: E402
from pretrain_fixtures import write_corpus  # noqa: E402
from pretrain_fixtures import write_vocab  # noqa: E402
from slow_marks import slow_covered_by  # noqa: E402

SMALL = dict(sequence_length=32, max_predictions_per_seq=5, dupe_factor=2, progress=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Three files (one of them in plain paragraphs) and the tokenizers of
    every family."""
    from kerasbert.text.sentencepiece_training import train_sentencepiece

    d = tmp_path_factory.mktemp("beam")
    files = [write_corpus(str(d / f"part{i}.txt"), n, seed=i) for i, n in enumerate((90, 130))]
    paragraphs = d / "part2.txt"
    paragraphs.write_text(
        "\n\n".join(f"The cat sat on mat {i}. A dog ran under the tree. Big red bird sings."
                    for i in range(40)) + "\n", encoding="utf-8")
    files.append(str(paragraphs))
    return {
        "files": files,
        "wordpiece": write_vocab(str(d)),
        "bpe": _bpe(files[:1], str(d / "bpe")),
        "sentencepiece": train_sentencepiece(files[:1], 43, str(d / "sp"))[0],
    }


def _bpe(files, directory):
    from kerasbert.text.bpe_training import train_bpe

    train_bpe(files, 300, directory)
    return directory


def records(directory):
    """The multiset of serialized examples of a shard folder."""
    import tensorflow as tf

    meta = json.loads(open(os.path.join(directory, "metadata.json")).read())
    paths = [os.path.join(directory, n) for n in sorted(meta["shards"])]
    data = tf.data.TFRecordDataset(paths, compression_type=meta["compression"] or "")
    return collections.Counter(r.numpy() for r in data), meta


# (vocabulary, writer options): every objective and masking mode.
OBJECTIVES = {
    "nsp": ("wordpiece", dict(objective="nsp")),
    "nsp_whole_word": ("wordpiece", dict(objective="nsp", whole_word_mask=True, gzip=True)),
    "sop": ("sentencepiece", dict(objective="sop")),
    "none_unmasked": ("wordpiece", dict(objective="none", masking=False)),
    "roberta_full_sentences": ("bpe", dict(objective="none")),
}


# 20-27 s each: three writes (local, Beam in-process, Beam on 2 worker
# processes) per objective. "nsp" stays in the default suite; each other
# parameter adds its objective or masking mode to the same Beam pipeline,
# which the default suite covers with "nsp" and the local writer's tests of
# that objective.
@pytest.mark.parametrize("name", [
    pytest.param("none_unmasked", id="none_unmasked", marks=slow_covered_by(
        "tests/data/test_beam_writer.py::test_direct_runner_writes_the_local_writers_records[nsp]",
        "tests/data/test_writer_interop.py::test_our_reader_reads_static_and_unmasked_files")),
    pytest.param("nsp", id="nsp"),
    pytest.param("nsp_whole_word", id="nsp_whole_word", marks=slow_covered_by(
        "tests/data/test_beam_writer.py::test_direct_runner_writes_the_local_writers_records[nsp]",
        "tests/data/test_instances.py::test_whole_word_masking_never_splits_a_word",
        "tests/data/test_writer.py::test_gzip")),
    pytest.param("roberta_full_sentences", id="roberta_full_sentences",
                 marks=slow_covered_by(
                     "tests/data/test_beam_writer.py::test_direct_runner_writes_the_local_writers_records[nsp]",
                     "tests/data/test_writer.py::test_subword_tokenizer_data[bpe]")),
    pytest.param("sop", id="sop", marks=slow_covered_by(
        "tests/data/test_beam_writer.py::test_direct_runner_writes_the_local_writers_records[nsp]",
        "tests/data/test_instances.py::test_sop_swaps_half_and_swaps_really_swap",
        "tests/data/test_writer.py::test_subword_tokenizer_data[sentencepiece]")),
])
def test_direct_runner_writes_the_local_writers_records(corpus, tmp_path, name):
    """In-process and multi-process (2 SDK worker processes) DirectRunner."""
    vocab, options = OBJECTIVES[name]
    files = corpus["files"]
    local = writer.create_pretraining_data(
        files, corpus[vocab], str(tmp_path / "local"), num_shards=2, **options, **SMALL)
    # Another input order and shard count: neither changes the records.
    beam = writer.create_pretraining_data(
        files[::-1], corpus[vocab], str(tmp_path / "beam"), num_shards=3, runner="direct",
        **options, **SMALL)
    writer.create_pretraining_data(
        files, corpus[vocab], str(tmp_path / "multi"), num_shards=3, runner="direct", workers=2,
        **options, **SMALL)
    ours, _ = records(tmp_path / "local")
    theirs, meta = records(tmp_path / "beam")
    assert sum(ours.values()) > 50
    assert ours == theirs
    # Shard bytes depend only on the inputs: the same with 2 worker processes.
    for shard in meta["shards"]:
        assert (tmp_path / "multi" / shard).read_bytes() == (tmp_path / "beam" / shard).read_bytes()
    assert meta == json.loads(json.dumps(beam))
    assert meta["num_instances"] == local["num_instances"] == sum(meta["shards"].values())
    assert meta["num_documents"] == local["num_documents"]
    for key in ("features", "objective", "masking", "whole_word_mask", "tokenizer",
                "vocab_sha256", "compression"):
        assert meta[key] == local[key], key
    assert meta["options"]["runner"] == "direct"
    assert sorted(os.listdir(tmp_path / "beam")) == ["metadata.json"] + sorted(meta["shards"])


# 28 s: `create-pretraining-data --runner direct --workers 2` as a console
# script, read by both readers; the default suite runs the 2-worker pipeline
# through the API ("nsp": byte-identical shards), the console script with
# Beam runners, and Model Garden's loader on the local writer's records.
@slow_covered_by("tests/data/test_beam_writer.py::test_direct_runner_writes_the_local_writers_records[nsp]",
                 "tests/data/test_beam_writer.py::test_runner_without_its_configuration_exits_2",
                 "tests/data/test_writer_interop.py::test_model_garden_bert_pretrain_loader_reads_our_files")
def test_multi_process_direct_runner_from_the_cli(corpus, tmp_path):
    """`kerasbert create-pretraining-data --runner direct --workers 2`, run
    from another folder: the shards are byte for byte the in-process
    runner's (they depend only on the inputs), and both readers read them."""
    files = corpus["files"]
    in_process = tmp_path / "in_process"
    writer.create_pretraining_data(files, corpus["wordpiece"], str(in_process), num_shards=2,
                                   runner="direct", **SMALL)
    out = tmp_path / "multi"
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    kerasbert = os.path.join(os.path.dirname(sys.executable), "kerasbert")
    command = [kerasbert, "create-pretraining-data", "--input", *files,
               "--vocab", corpus["wordpiece"], "--output-dir", str(out), "--max-seq-length", "32",
               "--max-predictions-per-seq", "5", "--dupe-factor", "2", "--num-shards", "2",
               "--runner", "direct", "--workers", "2", "--no-progress"]
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Wrote" in done.stdout
    for name in json.loads((in_process / "metadata.json").read_text())["shards"]:
        assert (out / name).read_bytes() == (in_process / name).read_bytes(), name
    # Our reader and tf-models-official's loader read the Beam output.
    from official.nlp.data import pretrain_dataloader

    import kerasbert.data as kdata

    ours = read_shards(str(out), 32, 5)
    batch = next(iter(kdata.pretraining_dataset(str(out / "part-*"), 4, shuffle=False,
                                                repeat=False)))
    written = {tuple(ids) for ids in ours["input_ids"]}
    assert all(tuple(ids) in written for ids in batch["input_word_ids"].numpy())
    config = pretrain_dataloader.BertPretrainDataConfig(
        input_path=os.path.join(out, "part-*"), seq_length=32, max_predictions_per_seq=5,
        global_batch_size=4, use_next_sentence_label=True, is_training=False)
    garden = next(iter(pretrain_dataloader.BertPretrainDataLoader(config).load()))
    assert all(tuple(ids) in written for ids in garden["input_word_ids"].numpy())
    assert garden["masked_lm_positions"].shape == (4, 5)


def _tiny_text_dataset(data_dir, num_examples):
    """A real TFDS dataset prepared in `data_dir` by a builder defined here:
    num_examples documents of 1-6 sentences (every 7th one empty)."""
    import random

    import tensorflow_datasets as tfds

    from pretrain_fixtures import sentence

    class KerasbertTinyText(tfds.core.GeneratorBasedBuilder):
        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(
                builder=self, features=tfds.features.FeaturesDict({"text": tfds.features.Text()}))

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples()}

        def _generate_examples(self):
            rng = random.Random(0)
            for i in range(num_examples):
                n = 0 if i % 7 == 3 else rng.randint(1, 6)
                yield i, {"text": " ".join(sentence(rng).capitalize() for _ in range(n))}

    builder = KerasbertTinyText(data_dir=str(data_dir))
    builder.download_and_prepare()
    return builder.name


def test_tfds_input_in_example_ranges(corpus, tmp_path, monkeypatch):
    """A TFDS split is read in ranges of examples (here 64, so 3 sources
    for 150 examples); the records equal the local writer's."""
    import functools

    import tensorflow_datasets as tfds

    name = _tiny_text_dataset(tmp_path / "tfds", 150)
    monkeypatch.setattr(tfds, "load", functools.partial(tfds.load, data_dir=str(tmp_path / "tfds")))
    monkeypatch.setattr(beam_writer, "TFDS_RANGE", 64)
    spec = [f"tfds:{name}:train"]
    assert [s[2:] for s in beam_writer.match_sources(spec, "text")] == [
        (0, 64), (64, 128), (128, 150)]
    local = writer.create_pretraining_data(spec, corpus["wordpiece"], str(tmp_path / "l"),
                                           text_field="text", **SMALL)
    beam = writer.create_pretraining_data(spec, corpus["wordpiece"], str(tmp_path / "b"),
                                          text_field="text", runner="direct", **SMALL)
    assert records(tmp_path / "l")[0] == records(tmp_path / "b")[0]
    assert beam["num_documents"] == local["num_documents"] == sum(i % 7 != 3 for i in range(150))


def test_runner_without_its_configuration_exits_2(corpus, tmp_path):
    kerasbert = os.path.join(os.path.dirname(sys.executable), "kerasbert")
    base = [kerasbert, "create-pretraining-data", "--input", corpus["files"][0],
            "--vocab", corpus["wordpiece"], "--no-progress"]
    for runner, missing in (("flink", "--flink_master"), ("spark", "--spark_master_url"),
                            ("dataflow", "--project")):
        out = tmp_path / runner
        done = subprocess.run(base + ["--output-dir", str(out), "--runner", runner],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 2, done.stderr[-2000:]
        assert missing in done.stderr and "Traceback" not in done.stderr
        assert not out.exists() or not os.listdir(out)
    done = subprocess.run(base + ["--output-dir", str(tmp_path / "x"), "--", "--foo=1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "need a Beam --runner" in done.stderr


def test_missing_beam_package_is_named(corpus, tmp_path, monkeypatch):
    real = writer.importlib.util.find_spec
    monkeypatch.setattr(writer.importlib.util, "find_spec",
                        lambda name, *a: None if name == "apache_beam" else real(name, *a))
    with pytest.raises(UsageError, match="needs the package apache-beam"):
        writer.create_pretraining_data(corpus["files"], corpus["wordpiece"], str(tmp_path / "o"),
                                       runner="direct", **SMALL)


def test_failed_pipeline_keeps_earlier_output_and_leaves_nothing_readable(
        corpus, tmp_path, monkeypatch):
    out = tmp_path / "out"
    run = dict(num_shards=2, runner="direct", **SMALL)
    writer.create_pretraining_data(corpus["files"], corpus["wordpiece"], str(out), **run)
    before = {n: (out / n).read_bytes() for n in os.listdir(out)}
    calls = []

    def failing(self, documents):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("worker lost")
        return real(self, documents)

    real = beam_writer.ChunkMaker.framed
    monkeypatch.setattr(beam_writer.ChunkMaker, "framed", failing)
    with pytest.raises(Exception, match="worker lost"):
        writer.create_pretraining_data(corpus["files"], corpus["wordpiece"], str(out),
                                       overwrite=True, **run)
    assert {n: (out / n).read_bytes() for n in os.listdir(out)} == before
    # Into a new folder: nothing left at all.
    calls.clear()
    with pytest.raises(Exception, match="worker lost"):
        writer.create_pretraining_data(corpus["files"], corpus["wordpiece"], str(tmp_path / "new"),
                                       **run)
    assert not (tmp_path / "new").exists()


def test_existing_output_needs_overwrite(corpus, tmp_path):
    out = str(tmp_path / "out")
    run = dict(runner="direct", **SMALL)
    writer.create_pretraining_data(corpus["files"][:1], corpus["wordpiece"], out, num_shards=2,
                                   **run)
    with pytest.raises(UsageError, match="already holds"):
        writer.create_pretraining_data(corpus["files"][:1], corpus["wordpiece"], out, **run)
    meta = writer.create_pretraining_data(corpus["files"][:1], corpus["wordpiece"], out,
                                          overwrite=True, **run)
    assert sorted(os.listdir(out)) == ["metadata.json", "part-00000-of-00001.tfrecord"]
    assert meta["num_instances"] > 0


def test_inputs_that_match_nothing_or_are_not_utf8(corpus, tmp_path):
    run = dict(runner="direct", **SMALL)
    with pytest.raises(UsageError, match="no file matches"):
        writer.create_pretraining_data([str(tmp_path / "none*.txt")], corpus["wordpiece"],
                                       str(tmp_path / "o"), **run)
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\xe9 au lait .\n".encode("latin-1"))
    with pytest.raises(UsageError, match="not UTF-8"):
        writer.create_pretraining_data([str(bad)], corpus["wordpiece"], str(tmp_path / "o"), **run)
    assert not (tmp_path / "o").exists()


def test_piece_round_trip_and_keys():
    framed = [b"\x04" + b"\x00" * 7 + b"crc!abcdcrc!", b"\x00" * 8 + b"crc!crc!"]
    keys = [beam_writer.record_key(r, 7) for r in framed]
    data = b"".join(k + r for k, r in zip(keys, framed))
    assert beam_writer.read_piece(data) == [k + r for k, r in zip(keys, framed)]
    # Read in blocks smaller than a record: records cross block boundaries.
    for block in (1, 3, 7, 50):
        assert list(beam_writer.iter_piece(io.BytesIO(data), block)) == [
            k + r for k, r in zip(keys, framed)]
    with pytest.raises(ValueError, match="ends inside"):
        list(beam_writer.iter_piece(io.BytesIO(data[:-3]), 4))
    assert beam_writer.record_key(framed[0], 7) != beam_writer.record_key(framed[0], 8)
