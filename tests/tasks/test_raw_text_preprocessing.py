"""Task preprocessors (kerasbert.preprocessing): raw text in tf.data gives
exactly the features of the CLI's converters (QA: windows, labels and
decoding extras of `convert_qa`, cut in the tf.data pipeline), the same
shuffled order for a seed, label vocabularies, and clear errors."""

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.data.finetuning import TaskData
from kerasbert.data.finetuning import convert_examples
from kerasbert.data.finetuning import make_dataset
from kerasbert.errors import UsageError
from kerasbert.data.finetuning import convert_qa
from kerasbert.preprocessing import MultipleChoicePreprocessor
from kerasbert.preprocessing import QuestionAnswererPreprocessor
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
    pre = TextClassifierPreprocessor(tokenizer, sequence_length=16, padding="max_length")
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
    pre = TokenClassifierPreprocessor(tokenizer, sequence_length=12, padding="max_length")
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
    pre = MultipleChoicePreprocessor(tokenizer, sequence_length=10, num_choices=3, padding="max_length")
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


# --- question answering -------------------------------------------------------

QA_LONG = " ".join("the cat sat on a mat . a dog ran to the river , who is the cat ?".split() * 3)


def _qa_cases():
    """The tricky answers of tests/data/finetuning/test_ft_qa.py (accents,
    inside a word, CJK, other whitespace, none) and words of a long context
    at every window edge, as (question, context, answer or None)."""
    cases = [
        ("where is the café?", "The Café de Flore is in Paris, France.", "Café de Flore"),
        ("when?", "It opened in the (1990s) era.", "1990"),
        ("what city?", "Capital: Paris!", "Paris!"),
        ("首都?", "北京是中国的首都。", "中国"),
        ("where?", "Paris,\n  France is big", ("Paris, France", 0)),
        ("who works?", "Mary  works\tat the BANK (1990s)\u3000near the river.",
         ("works at the BANK (1990s) near", 6)),
        ("who?", "The cat sat.", None),
        ("question", "", None),
    ]
    offset = 0
    for k, word in enumerate(QA_LONG.split(" ")):
        start = QA_LONG.index(word, offset)
        offset = start + len(word)
        if k % 3 == 0:
            cases.append(("what is it?", QA_LONG, (word, start)))
    questions, contexts, answers = [], [], []
    for question, context, answer in cases:
        if isinstance(answer, str):
            answer = (answer, context.index(answer))
        questions.append(question)
        contexts.append(context)
        answers.append(None if answer is None else {"text": answer[0], "answer_start": answer[1]})
    return questions, contexts, answers


@pytest.fixture(scope="module")
def qa_tokenizer(tmp_path_factory):
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + [str(d) for d in range(10)]
    words = ("the a cat dog sat on mat paris france is of what where who when river ( ) . , ? ! "
             ": café 中 国 北 京 首 都 是 的 。").split()
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + letters + ["##" + c for c in letters]
    return load_tokenizer(write_vocabulary(tmp_path_factory.mktemp("qa_vocab"), tokens + words))


def _qa_converted(tokenizer, questions, contexts, answers, **windows):
    examples = [{"id": str(i), "question": q, "context": c, "answers": [a] if a else [],
                 "is_impossible": a is None}
                for i, (q, c, a) in enumerate(zip(questions, contexts, answers))]
    return convert_qa(TaskData(examples, "qa"), tokenizer, is_training=True, **windows)


def _qa_dataset(questions, contexts, answers, form):
    texts = tf.ragged.constant([[a["text"]] if a else [] for a in answers], tf.string)
    starts = tf.ragged.constant([[a["answer_start"]] if a else [] for a in answers], tf.int64)
    if form == "dicts":  # as TFDS squad: answers {"text": [n], "answer_start": [n]}
        return tf.data.Dataset.from_tensor_slices({"question": questions, "context": contexts,
                                                   "answers": {"text": texts,
                                                               "answer_start": starts}})
    # Batched pairs with one answer each ("" / -1: none).
    first = {"text": [a["text"] if a else "" for a in answers],
             "answer_start": [a["answer_start"] if a else -1 for a in answers]}
    return tf.data.Dataset.from_tensor_slices(((questions, contexts), first)).batch(5)


@pytest.mark.parametrize("form", ["lists", "dataset", "dicts"])
def test_qa_windows_and_labels_equal_the_converter(qa_tokenizer, form):
    """Windows (ids, mask, types) and answer positions cut in tf.data equal
    convert_qa's, from lists (answers checked in Python) and from datasets
    of strings (answer spans found in the graph)."""
    questions, contexts, answers = _qa_cases()
    windows = dict(sequence_length=24, doc_stride=5, max_query_length=6)
    expected = _qa_converted(qa_tokenizer, questions, contexts, answers, **windows)
    pre = QuestionAnswererPreprocessor(qa_tokenizer, **windows)
    if form == "lists":
        dataset = pre.dataset((questions, contexts), answers, batch_size=7)
        assert int(dataset.cardinality()) == -(-len(expected) // 7)  # counted windows
        assert pre.version_2_with_negative  # some questions have no answer
    else:
        dataset = pre.dataset(_qa_dataset(questions, contexts, answers, form), batch_size=7)
    features, labels = _collect(dataset)
    _same(features, expected.x)
    for name in ("start_positions", "end_positions"):
        np.testing.assert_array_equal(labels[name], expected.y[name], err_msg=name)
    assert len(expected) > 3 * len(questions) and (labels["start_positions"] > 0).sum() > 15


@pytest.mark.parametrize("form", ["lists", "dataset"])
def test_qa_predict_decodes_windows_back_to_character_spans(qa_tokenizer, form):
    """predict's windows carry convert_qa's decoding extras, and their
    logits aggregate per example as decode_answers does on the converter's
    features."""
    from kerasbert.preprocessing import decode_answers

    questions, contexts, answers = _qa_cases()
    windows = dict(sequence_length=16, doc_stride=3, max_query_length=4)
    expected = _qa_converted(qa_tokenizer, questions, contexts, answers, **windows)
    pre = QuestionAnswererPreprocessor(qa_tokenizer, max_answer_length=5, **windows)
    x = (questions, contexts)
    if form == "dataset":
        x = tf.data.Dataset.from_tensor_slices(x)
    dataset, context = pre.predict_dataset(x, batch_size=6)
    (features,) = _collect(dataset)
    _same(features, expected.x)
    rng = np.random.default_rng(0)
    logits = {name: rng.normal(size=features["input_word_ids"].shape).astype(np.float32)
              for name in ("start_logits", "end_logits")}
    got = pre.postprocess(logits, context)
    extras = expected.extras
    want = decode_answers(contexts, logits["start_logits"], logits["end_logits"],
                          np.stack([extras["token_start_char"], extras["token_end_char"]], -1),
                          extras["example_index"],
                          token_is_max_context=extras["token_is_max_context"],
                          max_answer_length=5, version_2_with_negative=False)
    assert len(got) == len(questions)
    for g, w in zip(got, want):
        assert (g["answer"], g["start_char"], g["end_char"]) == (w.text, w.start_char, w.end_char)
        assert g["score"] == w.score and g["null_score"] == w.null_score
    assert sum(g["start_char"] >= 0 for g in got) > len(got) // 2


def test_qa_answer_spans_in_the_graph_equal_python():
    """The graph's answer check and end (other whitespace, Unicode spaces)
    are convert_qa's; a misplaced answer fails the pipeline."""
    from kerasbert.data.finetuning.qa import _answer_end
    from kerasbert.data.finetuning.qa import _answer_matches
    from kerasbert.preprocessing.qa_windows import PYTHON_WHITESPACE
    from kerasbert.preprocessing.qa_windows import answer_char_spans

    assert PYTHON_WHITESPACE == tuple(c for c in range(0x3001) if chr(c).isspace())
    cases = [("Paris,\n  France is big", "Paris, France", 0),
             ("a\u00a0b\u3000c  d", "b c d", 2), ("naïve café — 東京", "café — 東", 6),
             ("x  y", "x y z", 0), ("the end ", "end  ", 4), ("no answer", "", -1)]
    contexts, texts, starts = (list(column) for column in zip(*cases))
    want = [(s, _answer_end(c, s, t)) if s >= 0 else (-1, -1) for c, t, s in cases]
    # "x y z" is not in "x  y": the graph refuses it, as Python does.
    assert not _answer_matches("x  y", 0, "x y z")
    with pytest.raises(tf.errors.InvalidArgumentError, match="not at its answer_start"):
        answer_char_spans(tf.constant(contexts), tf.constant(texts), tf.constant(starts))
    ok = [0, 1, 2, 4, 5]
    assert all(_answer_matches(contexts[i], starts[i], texts[i]) for i in ok[:-1])
    start, end = answer_char_spans(tf.constant([contexts[i] for i in ok]),
                                   tf.constant([texts[i] for i in ok]),
                                   tf.constant([starts[i] for i in ok]))
    assert list(zip(start.numpy().tolist(), end.numpy().tolist())) == [want[i] for i in ok]


def test_qa_shuffle_and_clear_errors(qa_tokenizer):
    questions, contexts, answers = _qa_cases()
    pre = QuestionAnswererPreprocessor(qa_tokenizer, sequence_length=24, doc_stride=5,
                                       max_query_length=6)

    def epochs(count):  # the windows' ids, epoch after epoch, seed 3
        dataset = pre.dataset((questions, contexts), answers, batch_size=8, shuffle=True, seed=3)
        return [_collect(dataset)[0]["input_word_ids"] for _ in range(count)]

    first, second = epochs(2)
    np.testing.assert_array_equal(first, epochs(1)[0])  # one order per seed
    assert not np.array_equal(first, second)  # reshuffled every epoch
    assert sorted(map(tuple, first)) == sorted(map(tuple, second))  # the same windows

    with pytest.raises(UsageError, match="answer 1: answer text 'cat' not found at answer_start 3"):
        pre.dataset(([questions[0]] * 2, ["the cat", "a dog"]),
                    [None, {"text": "cat", "answer_start": 3}])
    with pytest.raises(UsageError, match="2 answers for 1 questions"):
        pre.dataset((["q"], ["c"]), [None, None])
    with pytest.raises(UsageError, match="no room for the context"):
        QuestionAnswererPreprocessor(qa_tokenizer, sequence_length=8, max_query_length=6) \
            .dataset((["q"], ["c"]))
    # An answer of characters the tokenizer drops covers no piece.
    dropped = pre.dataset((["q"], ["the \u200b cat"]), [{"text": "\u200b", "answer_start": 4}])
    with pytest.raises(tf.errors.InvalidArgumentError, match="covers no token"):
        _collect(dropped)
