"""Task preprocessors (kerasbert.preprocessing): raw text in tf.data gives
exactly the features of the CLI's converters, the same shuffled order for a
seed, label vocabularies, and clear errors."""

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.data.finetuning import TaskData
from kerasbert.data.finetuning import convert_examples
from kerasbert.data.finetuning import make_dataset
from kerasbert.errors import UsageError
from kerasbert.preprocessing import MultipleChoicePreprocessor
from kerasbert.preprocessing import TextClassifierPreprocessor
from kerasbert.preprocessing import TokenClassifierPreprocessor
from kerasbert.testing.files import write_vocabulary
from kerasbert.testing.sentence_models import WORDS
from kerasbert.text import load_tokenizer

TEXTS = ["the cat sat on the mat", "The dog sits, on a rug!", "hello world", "",
         "a quick brown fox jumps over the lazy dog and the cat and the dog " * 3,
         "naïve café — 東京 \u200b zero", "cats sitting", "sat"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    directory = tmp_path_factory.mktemp("vocab")
    return load_tokenizer(write_vocabulary(directory, WORDS))


def _collect(dataset):
    parts = list(dataset.as_numpy_iterator())
    if not isinstance(parts[0], tuple):
        parts = [(p,) for p in parts]
    return [{k: np.concatenate([p[i][k] for p in parts]) for k in parts[0][i]}
            if isinstance(parts[0][i], dict) else np.concatenate([p[i] for p in parts])
            for i in range(len(parts[0]))]


def _same(features, expected):
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(features[name], expected[name], err_msg=name)


@pytest.mark.parametrize("pair", [False, True])
def test_text_features_equal_the_converter(tokenizer, pair):
    labels = ["pos", "neg", "pos", "neg", "pos", "neg", "neg", "pos"]
    x = (TEXTS, TEXTS[::-1]) if pair else TEXTS
    pre = TextClassifierPreprocessor(tokenizer, sequence_length=16)
    features, y = _collect(pre.dataset(x, labels, batch_size=3))
    assert pre.task_type == ("pair" if pair else "classification")
    assert pre.label_names == ["neg", "pos"]
    examples = [dict(text_a=a, label=l, **({"text_b": b} if pair else {}))
                for a, b, l in zip(TEXTS, TEXTS[::-1], labels)]
    data = TaskData(examples, "pair" if pair else "classification", label_names=["neg", "pos"])
    expected = convert_examples(data, tokenizer, 16)
    _same(features, expected.x)
    np.testing.assert_array_equal(y, expected.y)


def test_shuffled_order_equals_the_features_path(tokenizer):
    """With one seed, batches from strings come in the order the CLI's
    features path gives them: fine-tuning from either sees the same data."""
    labels = list(range(8))
    pre = TextClassifierPreprocessor(tokenizer, sequence_length=16, label_names=[str(i) for i in range(8)])
    from_strings = list(pre.dataset(TEXTS, labels, batch_size=3, shuffle=True, seed=7)
                        .as_numpy_iterator())
    data = TaskData([{"text_a": t, "label": str(l)} for t, l in zip(TEXTS, labels)],
                    "classification", label_names=[str(i) for i in range(8)])
    features = convert_examples(data, tokenizer, 16)
    from_features = list(make_dataset(features, 3, shuffle=True, seed=7).as_numpy_iterator())
    assert len(from_strings) == len(from_features) == 3
    for (xs, ys), (xf, yf) in zip(from_strings, from_features):
        _same(xs, xf)
        np.testing.assert_array_equal(ys, yf)


def test_tagging_features_equal_the_converter(tokenizer):
    words = [["The", "cat", "sat", "sitting"], ["hello", "\u200b", "world", "!"],
             ["quick"] * 20, []]
    tags = [["O", "B-A", "O", "I-A"], ["O", "O", "B-A", "O"], ["B-A"] * 20, []]
    pre = TokenClassifierPreprocessor(tokenizer, sequence_length=12)
    features, y, weights = _collect(pre.dataset(words, tags, batch_size=3))
    data = TaskData([{"tokens": w, "labels": t} for w, t in zip(words, tags)], "tagging",
                    label_names=pre.label_names)
    expected = convert_examples(data, tokenizer, 12)
    _same(features, expected.x)
    np.testing.assert_array_equal(y, expected.y)
    np.testing.assert_array_equal(weights, expected.sample_weight)
    # Word positions for predict: each word's first piece, -1 when cut or empty.
    _, positions = pre.predict_dataset(words, batch_size=3)
    positions = positions.to_list()
    assert positions[1][1] == -1 and positions[2][9] == 10 and positions[2][10] == -1
    first = expected.sample_weight[0].nonzero()[0].tolist()
    assert positions[0] == first


def test_multiple_choice_features_equal_the_converter(tokenizer):
    contexts = ["the cat sat", "hello world"]
    choices = [["on the mat", "over the dog", "hello"], ["world", "the dog", ""]]
    pre = MultipleChoicePreprocessor(tokenizer, sequence_length=10, num_choices=3)
    features, y = _collect(pre.dataset((contexts, choices), [0, 2], batch_size=1))
    data = TaskData([{"context": c, "question": "", "choices": ch, "label": l}
                     for c, ch, l in zip(contexts, choices, [0, 2])], "multiple_choice")
    expected = convert_examples(data, tokenizer, 10)
    _same(features, expected.x)
    np.testing.assert_array_equal(y, [0, 2])


def test_datasets_of_strings_batched_or_not(tokenizer):
    labels = ["b", "a"] * 4
    pre = TextClassifierPreprocessor(tokenizer, sequence_length=16, label_names=["a", "b"])
    expected = _collect(pre.dataset(TEXTS, labels, batch_size=4))
    unbatched = tf.data.Dataset.from_tensor_slices((TEXTS, labels))
    for dataset in (unbatched, unbatched.batch(4)):
        got = _collect(pre.dataset(dataset, batch_size=4))
        _same(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])
    bad = tf.data.Dataset.from_tensor_slices((TEXTS, ["a"] * 7 + ["nope"])).batch(4)
    with pytest.raises(tf.errors.InvalidArgumentError, match="not in the label set"):
        _collect(pre.dataset(bad))


def test_clear_errors(tokenizer):
    pre = TextClassifierPreprocessor(tokenizer, sequence_length=16, label_names=["a", "b"])
    with pytest.raises(UsageError, match="label 'c' is not in the label set"):
        pre.dataset(["x", "y"], ["a", "c"])
    with pytest.raises(UsageError, match="3 labels for 2 texts"):
        pre.dataset(["x", "y"], ["a", "b", "a"])
    with pytest.raises(UsageError, match="text 1: expected a string"):
        pre.dataset(["x", 3], ["a", "b"])
    pre.dataset(["x", "y"], ["a", "b"])  # now single texts, for good
    with pytest.raises(UsageError, match="takes single texts; got pairs"):
        pre.dataset((["x"], ["y"]), ["a"])
    with pytest.raises(UsageError, match="2 classes .* the model's head has 3"):
        TextClassifierPreprocessor(tokenizer).label_ids(["a", "b"], num_labels=3)
    tagger = TokenClassifierPreprocessor(tokenizer)
    with pytest.raises(UsageError, match="example 0: 2 words but 1 labels"):
        tagger.dataset([["a", "b"]], [["O"]])
    with pytest.raises(UsageError, match="a list of words, got a string"):
        tagger.dataset(["a b"], [["O", "O"]])
    chooser = MultipleChoicePreprocessor(tokenizer, num_choices=2)
    with pytest.raises(UsageError, match="example 1: 3 choices, the model takes 2"):
        chooser.dataset([["a", "b"], ["a", "b", "c"]])
    with pytest.raises(UsageError, match="choice indices 0..1"):
        chooser.dataset([["a", "b"]], [2])


def test_config_round_trip_keeps_the_tokenizer_description(tokenizer, tmp_path):
    pre = TokenClassifierPreprocessor(tokenizer, sequence_length=12, label_names=["O", "B-A"])
    config = pre.get_config()
    assert config["tokenizer"]["type"] == "wordpiece" and config["label_names"] == ["O", "B-A"]
    again = TokenClassifierPreprocessor.from_config(config)
    with pytest.raises(UsageError, match="has no tokenizer"):
        again.tokenizer
    pre.save_assets(str(tmp_path))
    again.load_assets(str(tmp_path))
    assert again.tokenizer.tokenize_ids(["the cat"]).to_list() == \
        tokenizer.tokenize_ids(["the cat"]).to_list()
    assert again.get_config() == config
