"""Local task files: CSV/TSV/JSONL for every task type, CoNLL, SWAG; errors."""

import numpy as np
import pytest

from ft_fixtures import tokenizer, write_csv, write_jsonl, write_text
from kerasbert.data.finetuning import TaskDataError, convert_examples, load_task
from kerasbert.errors import UsageError


def test_korean_csv_classification(tmp_path):
    # Naver movie-review style: id, document, label (0/1).
    path = write_csv(tmp_path / "nsmc.csv", ["id", "document", "label"], [
        ["1", "정말 좋아요", "1"], ["2", "영화 별로야", "0"], ["3", "재미있다", "1"],
    ])
    data = load_task(f"csv:{path}", columns={"text": "document"})
    assert data.task_type == "classification"
    assert data.label_names == ["0", "1"]
    assert data.examples[0] == {"text_a": "정말 좋아요", "label": "1"}
    features = convert_examples(data, tokenizer(tmp_path), sequence_length=8)
    assert features.y.tolist() == [1, 0, 1]
    ids = features.x["input_word_ids"]
    assert ids.shape == (3, 8) and ids.dtype == np.int32
    tok = tokenizer(tmp_path)
    assert [tok.id_to_token(int(i)) for i in ids[0][:5]] == [
        "[CLS]", tok.id_to_token(int(tok.tokenize_ids("정말")[0])), tok.id_to_token(int(tok.tokenize_ids("좋")[0])),
        tok.id_to_token(int(tok.tokenize_ids("좋아요")[1])), "[SEP]"]
    assert "[UNK]" not in [tok.id_to_token(int(i)) for i in ids.ravel()]


def test_tsv_pairs_and_label_names(tmp_path):
    path = write_csv(tmp_path / "pairs.tsv", ["sentence1", "sentence2", "label"], [
        ["the cat sat", "a cat sat", "equivalent"], ["the dog", "paris", "not_equivalent"],
    ], delimiter="\t")
    names = ["not_equivalent", "equivalent"]
    data = load_task(f"tsv:{path}", label_names=names)
    assert data.task_type == "pair" and data.label_names == names
    features = convert_examples(data, tokenizer(tmp_path), sequence_length=16)
    assert features.y.tolist() == [1, 0]
    types = features.x["input_type_ids"][0]
    assert types.max() == 1 and features.x["input_mask"][0].sum() == 1 + 3 + 1 + 3 + 1


def test_jsonl_regression(tmp_path):
    path = write_jsonl(tmp_path / "sts.jsonl", [
        {"a": "the cat", "b": "a cat", "score": 4.5}, {"a": "dog", "b": "paris", "score": "0.25"},
    ])
    data = load_task(f"jsonl:{path}", task_type="regression",
                     columns={"text": "a", "text_pair": "b", "label": "score"})
    features = convert_examples(data, tokenizer(tmp_path), sequence_length=8)
    assert features.y.dtype == np.float32 and features.y.tolist() == [4.5, 0.25]
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"text": "x", "label": "high"}])
    with pytest.raises(TaskDataError, match=r"bad.jsonl line 1: regression label 'high'"):
        load_task(f"jsonl:{bad}", task_type="regression")


def test_jsonl_and_conll_tagging(tmp_path):
    path = write_jsonl(tmp_path / "ner.jsonl", [
        {"tokens": ["Paris", "is", "nice"], "tags": ["B-LOC", "O", "O"]},
    ])
    data = load_task(f"jsonl:{path}")
    assert data.task_type == "tagging" and data.label_names == ["O", "B-LOC"]
    conll = write_text(tmp_path / "ner.conll",
                       "-DOCSTART- -X- O O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n"
                       "Peter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n")
    data = load_task(f"conll:{conll}")
    assert [e["tokens"] for e in data.examples] == [["EU", "rejects"], ["Peter", "Blackburn"]]
    assert data.label_names == ["O", "B-ORG", "B-PER", "I-PER"]
    words_only = write_text(tmp_path / "predict.conll", "Peter\nlikes\n\nParis\n")
    with pytest.raises(TaskDataError, match="no labels"):
        load_task(f"conll:{words_only}")
    data = load_task(f"conll:{words_only}", require_labels=False, label_names=["O", "B-PER"])
    assert data.examples[0]["labels"] is None
    mismatch = write_jsonl(tmp_path / "mm.jsonl", [{"tokens": ["a", "b"], "labels": ["O"]}])
    with pytest.raises(TaskDataError, match=r"mm.jsonl line 1: 2 tokens .* but 1 labels"):
        load_task(f"jsonl:{mismatch}")


def test_swag_and_multiple_choice(tmp_path):
    header = ["", "video-id", "fold-ind", "startphrase", "sent1", "sent2", "gold-source",
              "ending0", "ending1", "ending2", "ending3", "label"]
    path = write_csv(tmp_path / "train.csv", header, [
        ["0", "v1", "5", "the cat sat. the dog", "the cat sat.", "the dog", "gold",
         "ran", "sat on the mat", "is paris", "flows", "1"],
    ])
    data = load_task(f"swag:{path}")
    assert data.task_type == "multiple_choice"
    assert data.examples[0]["question"] == "the dog" and len(data.examples[0]["choices"]) == 4
    features = convert_examples(data, tokenizer(tmp_path), sequence_length=12)
    assert features.x["input_word_ids"].shape == (1, 4, 12) and features.y.tolist() == [1]
    tok = tokenizer(tmp_path)
    row = [tok.id_to_token(int(i)) for i in features.x["input_word_ids"][0, 1] if i]
    assert row == ["[CLS]", "the", "cat", "sat", ".", "[SEP]", "the", "dog", "sat", "on", "the", "[SEP]"]
    test_file = write_csv(tmp_path / "test.csv", header[:-1], [
        ["0", "v1", "5", "x", "the cat", "the dog", "gold", "a", "b", "c", "d"]])
    with pytest.raises(TaskDataError, match="only for prediction"):
        load_task(f"swag:{test_file}")
    assert load_task(f"swag:{test_file}", require_labels=False).examples[0]["label"] is None
    options = write_jsonl(tmp_path / "mc.jsonl", [
        {"context": "the cat", "choices": ["sat", "ran", "is"], "label": 2}])
    data = load_task(f"jsonl:{options}")
    assert data.task_type == "multiple_choice" and data.num_labels == 3
    out_of_range = write_jsonl(tmp_path / "mc_bad.jsonl", [
        {"context": "the cat", "choices": ["sat", "ran"], "label": 5}])
    with pytest.raises(TaskDataError, match=r"mc_bad.jsonl line 1: label 5 is not in the label set"):
        load_task(f"jsonl:{out_of_range}")


def test_bad_input_errors(tmp_path):
    empty = write_text(tmp_path / "empty.csv", "")
    header_only = write_text(tmp_path / "header.csv", "text,label\n")
    path = write_csv(tmp_path / "reviews.csv", ["review", "stars"], [["good", "5"]])
    labels = write_csv(tmp_path / "labels.csv", ["text", "label"], [["good", "pos"], ["bad", "meh"]])
    ragged = write_text(tmp_path / "ragged.csv", "text,label\ngood,pos,extra\n")
    broken = write_text(tmp_path / "broken.jsonl", '{"text": "a", "label": "x"}\n{"text": \n')
    # (task spec, load_task keywords, error, message)
    cases = [
        ("glue_cola", {}, TaskDataError, r"Unknown task 'glue_cola'; valid tasks: glue/cola, "),
        ("glue/colaa", {}, UsageError, "Unknown GLUE task 'glue/colaa'"),
        (f"csv:{tmp_path / 'nope.csv'}", {}, TaskDataError, "Task file not found: .*nope.csv"),
        (f"csv:{empty}", {}, TaskDataError, "empty.csv has no examples"),
        (f"csv:{header_only}", {}, TaskDataError, "header.csv has no examples"),
        (f"csv:{path}", {"columns": {"text": "document", "label": "stars"}}, TaskDataError,
         r"missing column 'document' \(text\); columns: review, stars"),
        (f"csv:{path}", {}, TaskDataError, r"missing column for label .* columns: review, stars"),
        (f"csv:{labels}", {"label_names": ["neg", "pos"]}, TaskDataError,
         r"labels.csv line 3: label 'meh' is not in the label set"),
        (f"csv:{ragged}", {}, TaskDataError, "ragged.csv line 2: 3 fields but the header has 2"),
        (f"jsonl:{broken}", {}, TaskDataError, "broken.jsonl line 2: invalid JSON"),
        (f"csv:{labels}", {"task_type": "tagger"}, TaskDataError, "Unknown task type 'tagger'"),
    ]
    for spec, kwargs, error, message in cases:
        with pytest.raises(error, match=message):
            load_task(spec, **kwargs)
