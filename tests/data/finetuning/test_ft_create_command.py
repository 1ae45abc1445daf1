"""`kerasbert create-finetuning-data` (and tfrecords/create_finetuning_data.py)
on small local files: what it writes equals `convert_examples`' output."""

import importlib.util
import json
import os

import numpy as np
import pytest

from ft_fixtures import tokenizer, write_csv, write_jsonl, write_vocab
from kerasbert.cli import main
from kerasbert.data.finetuning import convert_examples, load_task, read_features

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _same_features(a, b):
    for slot in ("x", "y", "sample_weight", "extras"):
        left, right = getattr(a, slot), getattr(b, slot)
        if isinstance(left, dict):
            assert sorted(left) == sorted(right)
            pairs = [(left[k], right[k]) for k in left]
        else:
            pairs = [(left, right)]
        for x, y in pairs:
            if x is None:
                assert y is None
                continue
            assert x.dtype == y.dtype and x.shape == y.shape
            np.testing.assert_array_equal(x, y)
    assert a.label_names == b.label_names and a.task_type == b.task_type


@pytest.fixture()
def files(tmp_path):
    vocab = write_vocab(str(tmp_path))
    train = write_csv(tmp_path / "train.csv", ["review", "sentiment"], [
        ["good movie", "pos"], ["bad movie", "neg"], ["great movie", "pos"],
        ["정말 좋아요", "pos"], ["영화 별로야", "neg"], ["the cat sat on the mat", "neutral"],
    ])
    # The dev set lacks "neg"/"neutral": its own inferred names would give "pos" id 0.
    dev = write_csv(tmp_path / "dev.csv", ["review", "sentiment"], [["good", "pos"], ["great", "pos"]])
    return tmp_path, vocab, train, dev


def test_csv_train_and_validation(files, capsys):
    tmp_path, vocab, train, dev = files
    out = str(tmp_path / "ft")
    argv = ["create-finetuning-data", "--task", f"csv:{train}", "--text-column", "review",
            "--label-column", "sentiment", "--vocab", vocab, "--max-seq-length", "12",
            "--splits", f"train,validation={dev}", "--output-dir", out, "--num-shards", "2"]
    assert main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "train: 6 examples -> 6 features" in printed and "validation: 2 examples" in printed

    meta = json.load(open(os.path.join(out, "metadata.json"), encoding="utf-8"))
    assert meta["task_type"] == "classification" and meta["label_names"] == ["neg", "neutral", "pos"]
    assert meta["max_seq_length"] == 12 and meta["lower_case"] is True and meta["task"] == f"csv:{train}"
    assert meta["splits"]["train"]["num_features"] == 6
    assert meta["splits"]["train"]["files"] == ["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"]
    assert meta["splits"]["validation"]["options"]["task"] == f"csv:{dev}"
    assert meta["splits"]["train"]["features"]["label_ids"] == {"dtype": "int64", "shape": [1]}
    assert not [n for n in os.listdir(out) if n.endswith(".tmp")]

    tok = tokenizer(tmp_path)
    columns = {"text": "review", "label": "sentiment"}
    expected = convert_examples(load_task(f"csv:{train}", columns=columns), tok, 12)
    _same_features(read_features(out, "train", vocab_file=vocab), expected)
    valid = read_features(out, "validation")
    np.testing.assert_array_equal(valid.y, [2, 2])  # "pos" keeps the train id.
    expected = convert_examples(load_task(f"csv:{dev}", columns=columns, label_names=meta["label_names"]), tok, 12)
    _same_features(valid, expected)

    # A split already there is refused without --overwrite; with it, replaced.
    assert main(argv) == 2
    assert "already has split(s) train, validation; pass --overwrite" in capsys.readouterr().err
    assert main(argv + ["--overwrite", "--num-shards", "1"]) == 0
    assert sorted(n for n in os.listdir(out) if n.startswith("train")) == ["train-00000-of-00001.tfrecord"]


def test_jsonl_tagging_through_the_script(tmp_path, capsys):
    vocab = write_vocab(str(tmp_path))
    data = write_jsonl(tmp_path / "ner.jsonl", [
        {"words": ["Paris", "is", "the", "capital", "of", "France"],
         "tags": ["B-LOC", "O", "O", "O", "O", "B-LOC"]},
        {"words": ["the", "dog", "sat"], "tags": ["O", "B-PER", "O"]},
    ])
    spec = importlib.util.spec_from_file_location(
        "create_finetuning_data", os.path.join(REPO, "tfrecords", "create_finetuning_data.py"))
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = str(tmp_path / "ner")
    assert script.main(["--task", f"jsonl:{data}", "--task-type", "tagging", "--tokens-column", "words",
                        "--labels-column", "tags", "--vocab", vocab, "--max-seq-length", "8",
                        "--output-dir", out]) == 0, capsys.readouterr().err
    back = read_features(out, "train")
    columns = {"tokens": "words", "labels": "tags"}
    expected = convert_examples(load_task(f"jsonl:{data}", task_type="tagging", columns=columns),
                                tokenizer(tmp_path), 8)
    _same_features(back, expected)
    assert back.label_names[0] == "O" and back.sample_weight.shape == (2, 8)
    meta = json.load(open(os.path.join(out, "metadata.json"), encoding="utf-8"))
    assert set(meta["splits"]["train"]["features"]) == {
        "input_ids", "input_mask", "segment_ids", "label_ids", "label_weights", "word_ids"}


@pytest.mark.parametrize("change, message", [
    (lambda a, t: ["--task", "imdb_reviews"] + a[2:], "Unknown task 'imdb_reviews'"),
    (lambda a, t: a + ["--text-column", "nope"], "missing column 'nope' (text)"),
    (lambda a, t: a + ["--splits", "train,validation"], "is one local file, so it is one split"),
    (lambda a, t: a + ["--splits", f"train,validation={t}/bad_dev.csv"], "label 'meh' is not in the label set"),
    (lambda a, t: a[:-2] + ["--vocab", f"{t}/missing.txt"], "Vocabulary not found"),
])
def test_bad_input_exits_2_and_writes_nothing(files, capsys, change, message):
    tmp_path, vocab, train, _ = files
    write_csv(tmp_path / "bad_dev.csv", ["review", "sentiment"], [["good", "pos"], ["so so", "meh"]])
    out = str(tmp_path / "ft")
    base = ["--task", f"csv:{train}", "--label-column", "sentiment", "--output-dir", out, "--vocab", vocab]
    argv = ["create-finetuning-data"] + change(base, str(tmp_path))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not os.path.exists(out) or os.listdir(out) == []
