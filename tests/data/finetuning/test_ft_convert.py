"""Converters: tagging alignment, label errors, multiple choice, model.fit-ready datasets."""

import numpy as np
import pytest

from ft_fixtures import tokenizer
from kerasbert.data.finetuning import (
    TaskData, TaskDataError, check_max_seq_length, convert_examples, make_dataset,
)


def test_tagging_first_piece_alignment(tmp_path):
    tok = tokenizer(tmp_path)
    data = TaskData([
        {"tokens": ["Paris", "flows", "U.S.", "zq"], "labels": ["B-LOC", "O", "B-LOC", "O"]},
        {"tokens": ["the", "cat", "sat", "on", "the", "mat"], "labels": ["O"] * 5 + ["B-LOC"]},
    ], "tagging", ["O", "B-LOC"])
    features = convert_examples(data, tok, sequence_length=6)
    pieces = [tok.id_to_token(int(i)) for i in features.x["input_word_ids"][0]]
    # "U.S." is 4 pieces (u . s .): only its first piece is labelled.
    assert pieces == ["[CLS]", "paris", "flows", "u", ".", "[SEP]"]
    assert features.extras["word_ids"][0].tolist() == [-1, 0, 1, 2, 2, -1]
    assert features.sample_weight[0].tolist() == [0, 1, 1, 1, 0, 0]
    assert features.y[0].tolist() == [0, 1, 0, 1, 0, 0]
    assert features.x["input_mask"][1].tolist() == [1] * 6
    # Example 0 loses "zq", example 1 "the mat": counted, not silently dropped.
    assert features.stats["truncated_words"] == 3 and features.stats["truncated_examples"] == 2
    wide = convert_examples(data, tok, sequence_length=32)
    assert wide.stats["truncated_words"] == 0
    assert wide.sample_weight.sum() == 10  # one weight per word
    first = wide.sample_weight[0] > 0
    assert wide.y[0][first].tolist() == [1, 0, 1, 0]
    words = wide.extras["word_ids"][0][first].tolist()
    assert words == [0, 1, 2, 3]
    assert features.sample_weight.dtype == np.float32 and features.y.dtype == np.int32
    bad = TaskData([{"tokens": ["a"], "labels": ["B-XYZ"]}], "tagging", ["O", "B-LOC"], "ner.jsonl")
    with pytest.raises(TaskDataError, match=r"ner.jsonl example 0 word 0: label 'B-XYZ' is not in the label set"):
        convert_examples(bad, tok, 8)


def test_classification_label_errors(tmp_path):
    tok = tokenizer(tmp_path)
    data = TaskData([{"text_a": "good", "label": "pos"}, {"text_a": "bad", "label": "neutral"}],
                    "classification", ["neg", "pos"], "reviews")
    with pytest.raises(TaskDataError, match=r"reviews example 1: label 'neutral' is not in the label set \['neg', 'pos'\]"):
        convert_examples(data, tok, 8)
    data.examples[1]["label"] = 7
    with pytest.raises(TaskDataError, match="example 1: label 7 is not in the label set"):
        convert_examples(data, tok, 8)
    data.examples[1]["label"] = 0
    assert convert_examples(data, tok, 8).y.tolist() == [1, 0]


def test_check_max_seq_length():
    class Backbone:
        max_sequence_length = 128

    assert check_max_seq_length(128, Backbone()) == 128
    with pytest.raises(TaskDataError, match=r"max_seq_length 512 is above the backbone's 128 positions"):
        check_max_seq_length(512, Backbone())
    with pytest.raises(TaskDataError, match="above the backbone's 64"):
        check_max_seq_length(65, 64)


def test_make_dataset_for_fit(tmp_path):
    tok = tokenizer(tmp_path)
    data = TaskData([{"text_a": f"the cat {i}", "label": str(i % 2)} for i in range(5)],
                    "classification", ["0", "1"])
    features = convert_examples(data, tok, 8)
    batches = list(make_dataset(features, 2))
    x, y = batches[0]
    assert sorted(x) == ["input_mask", "input_type_ids", "input_word_ids"]
    assert x["input_word_ids"].shape == (2, 8) and y.numpy().tolist() == [0, 1]
    assert [len(b[1]) for b in batches] == [2, 2, 1]
    one = [b[1].numpy().tolist() for b in make_dataset(features, 5, shuffle=True, seed=3)]
    two = [b[1].numpy().tolist() for b in make_dataset(features, 5, shuffle=True, seed=3)]
    assert one == two and sorted(one[0]) == [0, 0, 0, 1, 1]
    tagging = convert_examples(TaskData([{"tokens": ["a"], "labels": ["O"]}], "tagging", ["O"]), tok, 4)
    x, y, w = next(iter(make_dataset(tagging, 1)))
    assert y.shape == w.shape == (1, 4)
    x_only = next(iter(make_dataset(features, 2, labels=False)))
    assert isinstance(x_only, dict)


def test_bpe_tagging_pieces_are_those_of_the_sentence(tmp_path):
    """RoBERTa: each word's pieces are what the space-joined sentence gives
    (so a served model, which tokenizes raw text, sees the training pieces):
    "Ġlives", not "lives"; the first word has no leading space."""
    from kerasbert.text.bpe_training import train_bpe
    from kerasbert.text.tokenizer_loading import load_tokenizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("John lives in Paris , France .\nMary works in London .\n" * 50,
                      encoding="utf-8")
    train_bpe([str(corpus)], 300, str(tmp_path / "bpe"))
    tok = load_tokenizer(str(tmp_path / "bpe"))
    words = ["John", "lives", "in", "Paris", ",", "France", "."]
    data = TaskData([{"tokens": words, "labels": ["B-PER", "O", "O", "B-LOC", "O", "B-LOC", "O"]},
                     {"tokens": ["Mary", "", "works"], "labels": ["B-PER", "O", "O"]}],
                    "tagging", ["O", "B-PER", "B-LOC"])
    features = convert_examples(data, tok, 24)
    ids = features.x["input_word_ids"][0]
    n = int(features.x["input_mask"][0].sum())
    sentence = tok.tokenize_ids([" ".join(words)])[0].numpy().tolist()
    assert ids[1:n - 1].tolist() == sentence
    assert ids[0] == tok.cls_id and ids[n - 1] == tok.sep_id
    first_pieces = [tok.id_to_token(int(ids[p])) for p in np.flatnonzero(features.sample_weight[0])]
    assert first_pieces[0] == "John" and first_pieces[1:4] == ["Ġlives", "Ġin", "ĠParis"]
    # A blank word stays empty (no stray "Ġ" piece) and carries no label.
    assert features.stats["empty_words"] == 1
    assert features.sample_weight[1].sum() == 2
