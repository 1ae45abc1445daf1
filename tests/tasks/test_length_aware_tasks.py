"""Length-aware batches in the task models: `fit`, `evaluate` and `predict`
on raw text give the same losses, metrics and predictions whether each
batch is cut to its longest row (the default) or padded to T, for every
example kind; `predict` returns rows in input order; the steps that need
one shape (XLA on TensorFlow, several steps per execution, length-dependent
attention) keep T."""

import numpy as np
import pytest
import keras
import tensorflow as tf

from kerasbert.models import BertBackbone
from kerasbert.preprocessing import MultipleChoicePreprocessor
from kerasbert.preprocessing import QuestionAnswererPreprocessor
from kerasbert.preprocessing import TextClassifierPreprocessor
from kerasbert.preprocessing import TokenClassifierPreprocessor
from kerasbert.tasks import MultipleChoice
from kerasbert.tasks import QuestionAnswerer
from kerasbert.tasks import TextClassifier
from kerasbert.tasks import TokenClassifier
from kerasbert.testing.files import write_vocabulary
from kerasbert.testing.sentence_models import WORDS
from kerasbert.text import load_tokenizer

T = 64
RNG = np.random.default_rng(0)
PLAIN = WORDS[5:-7]


def _sentence(low=1, high=40):
    return " ".join(RNG.choice(PLAIN, size=int(RNG.integers(low, high))))


TEXTS = [_sentence() for _ in range(24)] + ["", "hello"]
PAIRS = ([_sentence(1, 12) for _ in TEXTS], [_sentence(1, 12) for _ in TEXTS])
WORD_ROWS = [t.split() or ["hello"] for t in TEXTS]
TAGS = [["B" if w in ("cat", "dog") else "O" for w in row] for row in WORD_ROWS]
CONTEXTS = [_sentence(1, 80 if i == 3 else 12) + " the cat sat on the mat" for i in range(8)]
QUESTIONS = ["where sat the cat ?"] * 8
ANSWERS = [{"text": "the mat", "answer_start": c.rindex("the mat")} for c in CONTEXTS]
CHOICES = ([_sentence(1, 20) for _ in range(10)],
           [[_sentence(1, 8), _sentence(1, 30)] for _ in range(10)])


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return load_tokenizer(write_vocabulary(tmp_path_factory.mktemp("vocab"), WORDS))


def _backbone():
    return BertBackbone(vocabulary_size=len(WORDS), num_layers=2, num_heads=2, hidden_dim=16,
                        intermediate_dim=32, max_sequence_length=T, dropout=0.0)


CASES = {
    "pair": (lambda: TextClassifier(_backbone(), num_classes=2, dropout=0.0),
             lambda tok, p: TextClassifierPreprocessor(tok, T, ["a", "b"], padding=p),
             PAIRS, ["a", "b"] * 13),
    "tagging": (lambda: TokenClassifier(_backbone(), num_labels=2, dropout=0.0),
                lambda tok, p: TokenClassifierPreprocessor(tok, T, ["B", "O"], padding=p),
                WORD_ROWS, TAGS),
    "qa": (lambda: QuestionAnswerer(_backbone(), dropout=0.0),
           lambda tok, p: QuestionAnswererPreprocessor(tok, T, doc_stride=16,
                                                       max_query_length=8, padding=p),
           (QUESTIONS, CONTEXTS), ANSWERS),
    "choices": (lambda: MultipleChoice(_backbone(), num_choices=2, dropout=0.0),
                lambda tok, p: MultipleChoicePreprocessor(tok, T, num_choices=2, padding=p),
                CHOICES, [0, 1] * 5),
}


def _model(case, tokenizer, padding):
    build, preprocessor, _, _ = CASES[case]
    keras.utils.set_random_seed(7)
    model = build()
    model.preprocessor = preprocessor(tokenizer, padding)
    model.compile(learning_rate=1e-3)
    return model


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_losses_metrics_and_predictions_as_fixed_padding(tokenizer, case):
    _, _, x, y = CASES[case]
    runs = {}
    for padding in ("max_length", "longest"):
        model = _model(case, tokenizer, padding)
        batches = list(model._raw_dataset(x, y, batch_size=4))
        widths = {int(b[0]["input_mask"].shape[-1]) for b in batches}
        history = model.fit(x, y, batch_size=4, epochs=1, seed=1, verbose=0).history
        scores = model.evaluate(x, y, batch_size=4, verbose=0, return_dict=True)
        runs[padding] = (widths, history, scores, model.predict(x, batch_size=4, verbose=0))
    (fixed_widths, fixed_history, fixed_scores, fixed_pred), (widths, history, scores, pred) = (
        runs["max_length"], runs["longest"])
    assert fixed_widths == {T}
    assert all(w % 8 == 0 and w <= T for w in widths) and min(widths) < T
    for name in fixed_history:
        np.testing.assert_allclose(history[name], fixed_history[name], rtol=1e-4, atol=1e-5,
                                   err_msg=name)
    for name in fixed_scores:
        np.testing.assert_allclose(scores[name], fixed_scores[name], rtol=1e-4, atol=1e-5,
                                   err_msg=name)
    if case == "qa":
        for got, want in zip(pred, fixed_pred):
            assert (got["answer"], got["start_char"]) == (want["answer"], want["start_char"])
            np.testing.assert_allclose(got["score"], want["score"], rtol=1e-4, atol=1e-4)
    elif case == "tagging":  # per-word probabilities [words, tags]
        assert len(pred) == len(fixed_pred)
        for got, want in zip(pred, fixed_pred):
            np.testing.assert_allclose(got, want, atol=1e-5)
    else:
        np.testing.assert_allclose(pred, fixed_pred, atol=1e-5)


def test_predict_keeps_input_order(tokenizer):
    """Rows run in length order and come back in input order: each row's
    probabilities equal those of the row predicted alone."""
    model = _model("pair", tokenizer, "longest")
    x = PAIRS
    together = model.predict(x, batch_size=4, verbose=0)
    for i in (0, 5, 17, 25):
        alone = model.predict(([x[0][i]], [x[1][i]]), verbose=0)
        np.testing.assert_allclose(together[i], alone[0], atol=1e-5)


def test_fixed_shapes_where_the_step_needs_them(tokenizer):
    model = _model("pair", tokenizer, "longest")
    assert not model.needs_fixed_shapes() and model.batch_padding() == "longest"
    spec = model._raw_dataset(PAIRS, ["a", "b"] * 13, batch_size=4).element_spec
    # One dynamic length: the step is traced for it once, not per batch.
    assert spec[0]["input_word_ids"].shape.as_list() == [None, None]
    model.compile(learning_rate=1e-3, steps_per_execution=2)
    assert model.needs_fixed_shapes() and model.batch_padding() == "max_length"
    widths = {int(b[0]["input_mask"].shape[-1])
              for b in model._raw_dataset(PAIRS, ["a", "b"] * 13, batch_size=4)}
    assert widths == {T}
    model.compile(learning_rate=1e-3, jit_compile=True)
    assert model.needs_fixed_shapes()
    bigbird = TextClassifier(BertBackbone(vocabulary_size=len(WORDS), num_layers=1, num_heads=2,
                                          hidden_dim=16, intermediate_dim=32,
                                          max_sequence_length=T, attention="bigbird",
                                          block_size=4, num_random_blocks=1), num_classes=2)
    assert not bigbird.backbone.exact_at_any_length and bigbird.needs_fixed_shapes()


def test_bucketed_fit_is_seeded_and_sees_every_example(tokenizer):
    pre = TextClassifierPreprocessor(tokenizer, T, ["a", "b"], bucket_by_length=True)
    labels = ["a", "b"] * 13

    def epoch(seed):
        data = pre.dataset(TEXTS, labels, batch_size=4, shuffle=True, seed=seed)
        return [b[0]["input_word_ids"].numpy().tolist() for b in data]

    assert epoch(5) == epoch(5)
    rows = [tuple(r[:max(i for i, v in enumerate(r + [1]) if v) + 1]) for b in epoch(5) for r in b]
    assert len(rows) == len(TEXTS)
    config = pre.get_config()
    assert config["bucket_by_length"] and config["padding"] == "longest"
    assert TextClassifierPreprocessor.from_config(config).bucket_by_length


def test_bucketed_raw_text_groups_real_pieces_as_features_do(tokenizer):
    """Raw text is tokenized a pool at a time before it is bucketed, so its
    batches are the ones `make_dataset` gives the same examples' features
    with the same seed: grouped by real pieces. (Out-of-vocabulary words
    are many bytes and one [UNK] each: sorted by bytes, these would sort
    among the longest.)"""
    from kerasbert.data.finetuning import TaskData
    from kerasbert.data.finetuning import make_dataset

    texts = TEXTS + [" ".join(["zq" * 12] * n) for n in (1, 2, 3, 30)] * 3
    labels = ["a", "b"] * (len(texts) // 2)
    pre = TextClassifierPreprocessor(tokenizer, T, ["a", "b"], bucket_by_length=True)
    features = pre.task_features(TaskData(
        [{"text_a": t, "label": l} for t, l in zip(texts, labels)], "classification",
        label_names=["a", "b"]))
    for seed in (2, 9):
        raw = [(b[0]["input_word_ids"].numpy(), b[1].numpy())
               for b in pre.dataset(texts, labels, batch_size=4, shuffle=True, seed=seed)]
        made = [(x["input_word_ids"], y) for x, y in make_dataset(
            features, 4, shuffle=True, seed=seed, bucket_by_length=True).as_numpy_iterator()]
        assert len(raw) == len(made) == -(-len(texts) // 4)
        for (raw_ids, raw_y), (ids, y) in zip(raw, made):
            np.testing.assert_array_equal(raw_ids, ids)
            np.testing.assert_array_equal(raw_y, y)


def test_predict_orders_raw_rows_by_their_pieces(tokenizer):
    """`predict` runs raw rows sorted by the tokenizer's pieces: a word the
    vocabulary lacks is many characters and one [UNK]."""
    from kerasbert.tasks.row_order import length_order

    pre = TextClassifierPreprocessor(tokenizer, T, ["a", "b"])
    texts = ["cat dog cat dog cat", "zq" * 20, "", "cat", "zq" * 5 + " cat"]
    assert pre.piece_counts(texts).tolist() == [5, 1, 0, 1, 2]
    assert length_order(texts, pre.piece_counts).tolist() == [2, 1, 3, 4, 0]
    assert length_order(texts).tolist() == [2, 3, 4, 0, 1]  # characters
    pairs = (texts, ["cat"] * 4 + ["zq" * 30])
    assert length_order(pairs, pre.piece_counts).tolist() == [2, 1, 3, 4, 0]
    assert length_order(pairs).tolist() == [2, 3, 0, 1, 4]
    # Bytes that are not UTF-8 are counted, not refused, here.
    assert len(pre.piece_counts([b"\xff\xfe", "cat"])) == 2
    model = _model("pair", tokenizer, "longest")
    fixed = _model("pair", tokenizer, "max_length")
    np.testing.assert_allclose(model.predict(texts, batch_size=2, verbose=0),
                               fixed.predict(texts, batch_size=2, verbose=0), atol=1e-5)


def test_many_lengths_trace_the_step_at_most_twice(tokenizer):
    """Batches of several lengths reach one compiled step: TensorFlow traces
    `train_step` once for the first length and once for any length after,
    never once per batch."""
    model = _model("pair", tokenizer, "longest")
    traces = {"train": 0, "predict": 0}
    for name in traces:
        step = getattr(model, f"{name}_step")

        def counted(*args, _step=step, _name=name, **kwargs):
            traces[_name] += 1
            return _step(*args, **kwargs)

        setattr(model, f"{name}_step", counted)
    labels = ["a", "b"] * 13
    widths = {int(b[0]["input_mask"].shape[-1])
              for b in model._raw_dataset(TEXTS, labels, batch_size=2)}
    assert len(widths) >= 3
    model.fit(TEXTS, labels, batch_size=2, epochs=2, verbose=0)
    model.predict(TEXTS, batch_size=2, verbose=0)
    assert 1 <= traces["train"] <= 2 and 1 <= traces["predict"] <= 2, traces
