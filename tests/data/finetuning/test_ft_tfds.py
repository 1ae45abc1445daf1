"""TFDS task loaders under tfds.testing.mock_data (offline, random examples)."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from ft_fixtures import tokenizer
from kerasbert.data.finetuning import TaskDataError, convert_examples, load_task


def test_glue_single_pair_regression(tmp_path):
    tok = tokenizer(tmp_path)
    with tfds.testing.mock_data(num_examples=4):
        cola = load_task("glue/cola", "train")
        mrpc = load_task("glue/mrpc", "validation")
        stsb = load_task("glue/stsb", "train")
        mnli = load_task("glue/mnli", "validation")  # -> validation_matched
        # Test splits have no labels: refused for training, fine for prediction.
        with pytest.raises(TaskDataError, match=r"glue/cola test split has no labels \(label -1\); "
                           "use it only for prediction"):
            load_task("glue/cola", "test")
        predict = load_task("glue/cola", "test", require_labels=False)
    assert (cola.task_type, cola.label_names) == ("classification", ["unacceptable", "acceptable"])
    assert set(cola.examples[0]) == {"text_a", "label"} and len(cola) == 4
    assert mrpc.task_type == "pair" and mrpc.label_names == ["not_equivalent", "equivalent"]
    assert set(mrpc.examples[0]) == {"text_a", "text_b", "label"}
    assert stsb.task_type == "regression" and stsb.label_names is None
    assert mnli.split == "validation_matched" and mnli.label_names == ["entailment", "neutral", "contradiction"]
    assert not predict.has_labels and all(e["label"] is None for e in predict.examples)
    features = convert_examples(cola, tok, 16)
    assert features.y.dtype == np.int32 and features.x["input_word_ids"].shape == (4, 16)
    assert convert_examples(stsb, tok, 16).y.dtype == np.float32
    assert convert_examples(predict, tok, 16).y is None
    assert convert_examples(mrpc, tok, 16).x["input_type_ids"].max() == 1


def test_glue_label_minus_one_refused(tmp_path):
    # A split whose labels are -1 (as GLUE test splits are) is refused by value too.
    def as_dataset(self, split, **kwargs):
        return tf.data.Dataset.from_tensor_slices(
            {"sentence": [b"a cat"], "label": np.array([-1], np.int64), "idx": np.array([0], np.int32)})

    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
        with pytest.raises(TaskDataError, match=r"glue/sst2 train split has no labels \(label -1, example 0\)"):
            load_task("glue/sst2", "train")


def test_squad_v1_v2(tmp_path):
    with tfds.testing.mock_data(num_examples=3):
        v1 = load_task("squad", "validation")
        v2 = load_task("squad_v2", "train")
    assert v1.task_type == v2.task_type == "qa"
    assert set(v1.examples[0]) == {"id", "question", "context", "answers", "is_impossible"}
    assert all(not e["is_impossible"] and e["answers"] for e in v1.examples)
    assert all(e["answers"] == [] for e in v2.examples if e["is_impossible"])
    tok = tokenizer(tmp_path)
    # Random mock answers are not in their contexts: named, or skipped on request.
    answerable = [e for e in v1.examples if e["answers"]]
    with pytest.raises(TaskDataError, match=f"question id {answerable[0]['id']!r}: answer text"):
        convert_examples(v1, tok, 64, max_query_length=16)
    features = convert_examples(v1, tok, 64, max_query_length=16, is_training=False)
    assert features.extras["token_start_char"].shape == (len(features), 64)


def test_conll2003(tmp_path):
    tags = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
    with tfds.testing.mock_data(num_examples=2):
        # Random mock sequences have unequal lengths: named, not truncated.
        with pytest.raises(TaskDataError, match=r"conll2003 train example 0: \d+ tokens but \d+ ner tags"):
            load_task("conll2003", "train")

    def as_dataset(self, split, **kwargs):
        def gen():
            yield {"tokens": [b"Peter", b"lives", b"in", b"Paris"], "pos": [1, 2, 3, 4],
                   "chunks": [1, 2, 3, 4], "ner": [1, 0, 0, 5]}
        spec = {k: tf.TensorSpec([None], tf.string if k == "tokens" else tf.int64)
                for k in ("tokens", "pos", "chunks", "ner")}
        return tf.data.Dataset.from_generator(gen, output_signature=spec)

    with tfds.testing.mock_data(as_dataset_fn=as_dataset):
        data = load_task("conll2003", "validation")  # -> dev
    assert data.split == "dev" and data.task_type == "tagging" and data.label_names == tags
    features = convert_examples(data, tokenizer(tmp_path), 16)
    first = features.sample_weight[0] > 0
    assert features.y[0][first].tolist() == [1, 0, 0, 5]
