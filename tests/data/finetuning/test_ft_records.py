"""Converted features -> TFRecords + metadata.json -> the same features."""

import json
import os

import numpy as np
import pytest

from ft_fixtures import tokenizer, write_vocab
from kerasbert.data.finetuning import (
    TaskData, TaskDataError, convert_examples, make_dataset, read_features, write_features,
)


def _tasks():
    context = "the cat sat on the mat . the dog ran to the river ."
    return {
        "classification": TaskData([{"text_a": "good movie", "label": "pos"},
                                    {"text_a": "bad", "label": "neg"}], "classification", ["neg", "pos"]),
        "regression": TaskData([{"text_a": "a", "text_b": "b", "label": 0.5},
                                {"text_a": "c", "text_b": "d", "label": 4.0}], "regression"),
        "tagging": TaskData([{"tokens": ["Paris", "is"], "labels": ["B-LOC", "O"]}], "tagging", ["O", "B-LOC"]),
        "qa": TaskData([{"id": "1", "question": "who ran?", "context": context,
                         "answers": [{"text": "the dog", "answer_start": context.index("the dog")}],
                         "is_impossible": False}], "qa"),
        "multiple_choice": TaskData([{"context": "the cat", "question": "", "choices": ["sat", "ran", "is"],
                                      "label": 2}], "multiple_choice"),
    }


def _same(a, b):
    if isinstance(a, dict):
        assert sorted(a) == sorted(b)
        for key in a:
            _same(a[key], b[key])
    elif a is None:
        assert b is None
    else:
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("task_type", ["classification", "regression", "tagging", "qa", "multiple_choice"])
def test_round_trip(tmp_path, task_type):
    vocab = write_vocab(str(tmp_path))
    tok = tokenizer(tmp_path)
    options = {"doc_stride": 4, "max_query_length": 4} if task_type == "qa" else {}
    features = convert_examples(_tasks()[task_type], tok, 12, **options)
    out = str(tmp_path / "ft")
    write_features(out, "train", features, vocab, task="t", num_shards=2, options=options)
    back = read_features(out, "train", vocab_file=vocab)
    for slot in ("x", "y", "sample_weight", "extras"):
        _same(getattr(features, slot), getattr(back, slot))
    assert back.label_names == features.label_names and back.task_type == task_type
    meta = json.load(open(os.path.join(out, "metadata.json"), encoding="utf-8"))
    assert meta["task_type"] == task_type and meta["max_seq_length"] == 12
    assert meta["splits"]["train"]["num_features"] == len(features)
    assert len(meta["vocab_sha256"]) == 64
    assert not [n for n in os.listdir(out) if n.endswith(".tmp")]
    # Training batches from files equal those from raw text.
    for a, b in zip(make_dataset(features, 2, shuffle=True, seed=1), make_dataset(back, 2, shuffle=True, seed=1)):
        _same(a[0], b[0])


def test_split_mismatch_and_overwrite(tmp_path):
    vocab = write_vocab(str(tmp_path))
    tok = tokenizer(tmp_path)
    data = _tasks()["classification"]
    out = str(tmp_path / "ft")
    write_features(out, "train", convert_examples(data, tok, 12), vocab)
    with pytest.raises(TaskDataError, match="already has split 'train'"):
        write_features(out, "train", convert_examples(data, tok, 12), vocab)
    write_features(out, "train", convert_examples(data, tok, 12), vocab, overwrite=True)
    with pytest.raises(TaskDataError, match="max_seq_length 16 differs"):
        write_features(out, "validation", convert_examples(data, tok, 16), vocab)
    with pytest.raises(TaskDataError, match="has no split 'test'; it has train"):
        read_features(out, "test")
    other = tmp_path / "other"
    other.mkdir()
    (other / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", encoding="utf-8")
    with pytest.raises(TaskDataError, match="another vocabulary"):
        read_features(out, "train", vocab_file=str(other / "vocab.txt"))
