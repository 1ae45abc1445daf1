"""kerasbert.data.writer end to end: determinism, atomicity, metadata, gzip,
objectives, --no-masking, TFDS input, CLI errors."""

import json
import os
import sys

import numpy as np
import pytest

from kerasbert.data import chunks
from kerasbert.data import writer
from kerasbert.errors import UsageError

sys.path.insert(0, os.path.dirname(__file__))
from pretrain_fixtures import read_shards  # noqa: E402
from pretrain_fixtures import shard_bytes  # noqa: E402
from pretrain_fixtures import write_corpus  # noqa: E402
from pretrain_fixtures import write_vocab  # noqa: E402

SMALL = dict(sequence_length=32, max_predictions_per_seq=5, dupe_factor=2, progress=False)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    vocab = write_vocab(str(d))
    corpus = write_corpus(str(d / "corpus.txt"), 300)
    return vocab, corpus


def run(files, out, **kw):
    vocab, corpus = files
    opts = dict(SMALL, **kw)
    return writer.create_pretraining_data([corpus], vocab, str(out), **opts)


def test_metadata_describes_the_shards(files, tmp_path):
    meta = run(files, tmp_path, num_shards=3)
    on_disk = json.loads((tmp_path / "metadata.json").read_text())
    assert on_disk == json.loads(json.dumps(meta))
    assert sorted(os.listdir(tmp_path)) == [
        "metadata.json", "part-00000-of-00003.tfrecord",
        "part-00001-of-00003.tfrecord", "part-00002-of-00003.tfrecord"]
    assert meta["schema_version"] == 1 and meta["objective"] == "nsp"
    assert meta["masking"] == "static" and meta["compression"] is None
    assert meta["features"]["input_ids"] == {"dtype": "int64", "shape": [32]}
    assert meta["features"]["masked_lm_weights"] == {"dtype": "float32", "shape": [5]}
    assert meta["vocab_size"] == sum(1 for _ in open(files[0], encoding="utf-8"))
    assert len(meta["vocab_sha256"]) == 64
    assert meta["lower_case"] is True and meta["random_seed"] == 12345
    assert meta["options"]["dupe_factor"] == 2 and meta["num_documents"] == 300
    data = read_shards(str(tmp_path), 32, 5)
    assert len(data["input_ids"]) == meta["num_instances"] == sum(meta["shards"].values())
    assert max(meta["shards"].values()) - min(meta["shards"].values()) <= 1
    # Special ids are looked up: [CLS] is 6 and [SEP] 4 in the test vocab.
    assert (data["input_ids"][:, 0] == 6).all()
    rows = np.arange(len(data["input_ids"]))
    last = data["input_mask"].sum(1) - 1
    assert (data["input_ids"][rows, last] == 4).all()
    # Never a special token among the masked ones; fraction near 15%.
    w = data["masked_lm_weights"] > 0
    assert not np.isin(data["masked_lm_ids"][w], [0, 4, 6]).any()
    labels = data["next_sentence_labels"][:, 0]
    assert 0.4 < labels.mean() < 0.6


def test_deterministic_for_a_seed_and_across_workers(files, tmp_path):
    run(files, tmp_path / "a", num_shards=2)
    run(files, tmp_path / "b", num_shards=2)
    run(files, tmp_path / "c", num_shards=2, workers=2)
    run(files, tmp_path / "d", num_shards=2, random_seed=7)
    a = shard_bytes(tmp_path / "a")
    assert a == shard_bytes(tmp_path / "b")
    assert a == shard_bytes(tmp_path / "c")  # Worker count does not matter.
    assert a != shard_bytes(tmp_path / "d")


def test_failure_leaves_no_final_shard_or_metadata(files, tmp_path, monkeypatch):
    real = writer.input_chunks

    def failing(*args, **kwargs):
        for i, chunk in enumerate(real(*args, **kwargs)):
            if i == 3:
                raise RuntimeError("disk on fire")
            yield chunk

    monkeypatch.setattr(chunks, "CHUNK_DOCS", 16)
    monkeypatch.setattr(writer, "SHUFFLE_BUFFER", 10)  # Records reach the shards.
    monkeypatch.setattr(writer, "input_chunks", failing)
    with pytest.raises(RuntimeError, match="disk on fire"):
        run(files, tmp_path, num_shards=2)
    assert os.listdir(tmp_path) == []


def test_failure_keeps_previous_output(files, tmp_path, monkeypatch):
    run(files, tmp_path, num_shards=2)
    before = shard_bytes(tmp_path)
    monkeypatch.setattr(writer, "input_chunks", lambda *a, **k: iter([[["x"]], None]))
    with pytest.raises(TypeError):
        run(files, tmp_path, num_shards=2, overwrite=True)
    assert shard_bytes(tmp_path) == before
    assert sorted(os.listdir(tmp_path)) == ["metadata.json"] + sorted(before)


def test_refuses_existing_output_unless_overwrite(files, tmp_path):
    run(files, tmp_path, num_shards=2)
    with pytest.raises(UsageError, match="already holds"):
        run(files, tmp_path)
    meta = run(files, tmp_path, num_shards=1, overwrite=True)
    assert sorted(os.listdir(tmp_path)) == ["metadata.json", "part-00000-of-00001.tfrecord"]
    assert meta["num_instances"] > 0


def test_gzip(files, tmp_path):
    meta = run(files, tmp_path / "gz", gzip=True, num_shards=2)
    run(files, tmp_path / "plain", num_shards=2)
    assert meta["compression"] == "GZIP"
    assert all(name.endswith(".tfrecord.gz") for name in meta["shards"])
    with open(tmp_path / "gz" / "part-00000-of-00002.tfrecord.gz", "rb") as f:
        assert f.read(2) == b"\x1f\x8b"
    gz = read_shards(str(tmp_path / "gz"), 32, 5)
    plain = read_shards(str(tmp_path / "plain"), 32, 5)
    for name in gz:
        np.testing.assert_array_equal(gz[name], plain[name])


def test_objective_none_and_no_masking(files, tmp_path):
    meta = run(files, tmp_path, objective="none", masking=False, dupe_factor=1)
    assert meta["masking"] == "dynamic"
    assert sorted(meta["features"]) == ["input_ids", "input_mask", "segment_ids"]
    data = read_shards(str(tmp_path), 32, 5, objective="none", masked=False)
    assert (data["segment_ids"] == 0).all()
    assert data["input_mask"].sum(1).mean() > 25  # Packed full sentences.
    assert not (data["input_ids"] == 5).any()  # No [MASK] stored.
    import tensorflow as tf

    path = os.path.join(tmp_path, "part-00000-of-00001.tfrecord")
    record = next(iter(tf.data.TFRecordDataset(path))).numpy()
    assert set(tf.train.Example.FromString(record).features.feature) == {
        "input_ids", "input_mask", "segment_ids"}


def test_objective_sop(files, tmp_path):
    meta = run(files, tmp_path, objective="sop")
    data = read_shards(str(tmp_path), 32, 5, objective="sop")
    assert meta["objective"] == "sop"
    assert 0.4 < data["next_sentence_labels"].mean() < 0.6


def test_plain_paragraph_input_with_korean_and_cjk(files, tmp_path):
    vocab, _ = files
    text = tmp_path / "para.txt"
    lines = []
    for i in range(40):
        lines.append("The cat sat on the mat. The dog ran under the tree! Birds sing?")
        lines.append("한국어 영화 좋다. 영화 좋아요! 中文 字. 日本 語。本 語。")
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    meta = writer.create_pretraining_data(
        [str(text)], vocab, str(tmp_path / "out"), **SMALL)
    assert meta["num_documents"] == 80
    data = read_shards(str(tmp_path / "out"), 32, 5)
    assert len(data["input_ids"]) == meta["num_instances"] > 0


def test_tfds_input(files, tmp_path):
    import tensorflow_datasets as tfds

    with tfds.testing.mock_data(num_examples=20):
        meta = writer.create_pretraining_data(
            ["tfds:wikipedia/20230601.en"], files[0], str(tmp_path), text_field="text",
            **SMALL)
    assert meta["num_documents"] == 20 and meta["options"]["text_field"] == "text"


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(max_predictions_per_seq=40), "--max-predictions-per-seq 40"),
        (dict(masked_lm_prob=1.5), "--masked-lm-prob 1.5"),
        (dict(short_seq_prob=-0.1), "--short-seq-prob"),
        (dict(objective="mlm"), "--objective 'mlm'"),
        (dict(num_shards=0), "--num-shards 0"),
    ],
)
def test_bad_options(files, tmp_path, overrides, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        run(files, tmp_path, **overrides)
    assert not os.path.exists(tmp_path / "metadata.json")


def test_vocab_without_specials(files, tmp_path):
    bad = tmp_path / "bad_vocab.txt"
    bad.write_text("[PAD]\n[CLS]\n[SEP]\na\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"bad_vocab.txt lacks the special token\(s\) "
                       r"\[UNK\], \[MASK\]"):
        writer.create_pretraining_data([files[1]], str(bad), str(tmp_path / "o"), **SMALL)
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def subword_tokenizers(files, tmp_path_factory):
    """A byte-level BPE directory and a SentencePiece model on the corpus."""
    from kerasbert.text.bpe_training import train_bpe
    from kerasbert.text.sentencepiece_training import train_sentencepiece

    d = tmp_path_factory.mktemp("subword")
    train_bpe([files[1]], 300, str(d / "bpe"))
    return {"bpe": str(d / "bpe"),
            "sentencepiece": train_sentencepiece([files[1]], 43, str(d / "sp"))[0]}


@pytest.mark.parametrize("kind", ["bpe", "sentencepiece"])
def test_subword_tokenizer_data(files, subword_tokenizers, tmp_path, kind):
    """RoBERTa's and ALBERT's data: special ids of their own vocabulary,
    whole-word masks along "Ġ" / "▁" word starts, metadata naming them."""
    from kerasbert.text.tokenizer_loading import load_tokenizer

    vocab = subword_tokenizers[kind]
    objective = "none" if kind == "bpe" else "sop"
    meta = writer.create_pretraining_data(
        [files[1]], vocab, str(tmp_path), objective=objective, whole_word_mask=True, **SMALL)
    tokenizer = load_tokenizer(vocab)
    assert (meta["tokenizer"], meta["vocab_size"]) == (kind, tokenizer.vocabulary_size)
    assert meta["lower_case"] is (kind != "bpe")  # byte-level BPE is always cased
    data = read_shards(str(tmp_path), 32, 5, objective=objective)
    ids = data["input_ids"]
    assert (ids[:, 0] == tokenizer.cls_id).all()
    last = data["input_mask"].sum(1) - 1
    assert (ids[np.arange(len(ids)), last] == tokenizer.sep_id).all()
    assert (ids[data["input_mask"] == 0] == tokenizer.pad_id).all()
    assert (ids == tokenizer.mask_id).any()
    # Whole words: a masked piece that does not begin a word follows a
    # masked piece of its word. Exceptions: a sentence's first piece starts
    # a word whatever it is (BPE's "The" after "." has no "Ġ"), and
    # truncation can leave a word's tail right after [CLS]/[SEP].
    starts = tokenizer._word_start.numpy()
    orphans = continuations = 0
    for row, positions, original, weights in zip(
            ids, data["masked_lm_positions"], data["masked_lm_ids"], data["masked_lm_weights"]):
        chosen = set(positions[weights > 0].tolist())
        for position, token in zip(positions[weights > 0], original[weights > 0]):
            if not starts[token] and row[position - 1] not in (tokenizer.cls_id,
                                                               tokenizer.sep_id):
                continuations += 1
                orphans += position - 1 not in chosen
    assert continuations > 50 and orphans / continuations < 0.05, (orphans, continuations)


def test_bpe_data_is_full_sentences_only(files, subword_tokenizers, tmp_path):
    with pytest.raises(UsageError, match="--objective nsp: byte-level BPE"):
        writer.create_pretraining_data([files[1]], subword_tokenizers["bpe"],
                                       str(tmp_path / "o"), objective="nsp", **SMALL)
    assert not (tmp_path / "o").exists()


def _script_main():
    import importlib.util

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, "tfrecords", "create_pretraining_data.py")
    spec = importlib.util.spec_from_file_location("cpd_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--input", "missing.txt"], "Input file not found: missing.txt"),
        (["--vocab", "nope_vocab.txt"], "Vocabulary file not found: nope_vocab.txt"),
        (["--max-seq-length", "3"], "--max-seq-length 3"),
        (["--input", "tfds:wikipedia/20230601.en"], "--text-field"),
    ],
)
def test_cli_bad_input_exit_code_2(files, tmp_path, capsys, extra, message):
    vocab, corpus = files
    argv = ["--input", corpus, "--vocab", vocab, "--output-dir", str(tmp_path / "o"),
            "--no-progress"]
    for flag, value in zip(extra[::2], extra[1::2]):
        if flag in argv:
            argv[argv.index(flag) + 1] = value
        else:
            argv += [flag, value]
    mains = [_script_main()]
    from kerasbert import cli

    mains.append(lambda a: cli.main(["create-pretraining-data"] + a))
    for main in mains:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err
    assert not os.path.exists(tmp_path / "o" / "metadata.json")


def test_cli_script_writes(files, tmp_path, capsys):
    vocab, corpus = files
    argv = ["--input", corpus, "--vocab", vocab, "--output-dir", str(tmp_path),
            "--max-seq-length", "32", "--max-predictions-per-seq", "5",
            "--dupe-factor", "1", "--num-shards", "2", "--no-progress",
            "--whole-word-mask", "--no-lower-case", "--gzip"]
    assert _script_main()(argv) == 0
    assert "Wrote" in capsys.readouterr().out
    meta = json.loads((tmp_path / "metadata.json").read_text())
    assert meta["whole_word_mask"] is True and meta["lower_case"] is False
    assert meta["compression"] == "GZIP" and len(meta["shards"]) == 2


def test_shards_are_byte_identical_to_tf_record_writer(files, tmp_path):
    # Workers frame records (length, crc32c) and the main process writes
    # plain bytes: the files must equal what tf.io.TFRecordWriter writes.
    import gzip as gzip_lib

    import tensorflow as tf

    run(files, tmp_path / "plain", num_shards=2, workers=2)
    run(files, tmp_path / "gz", num_shards=2, gzip=True)
    for name, data in shard_bytes(tmp_path / "plain").items():
        path = str(tmp_path / "plain" / name)
        records = [r.numpy() for r in tf.data.TFRecordDataset(path)]
        again = str(tmp_path / "again.tfrecord")
        with tf.io.TFRecordWriter(again) as w:
            for record in records:
                w.write(record)
        assert open(again, "rb").read() == data
        with gzip_lib.open(tmp_path / "gz" / (name + ".gz"), "rb") as f:
            assert f.read() == data
