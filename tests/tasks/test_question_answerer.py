"""QuestionAnswerer: start/end logits with padding masked, the loss = mean
of the two cross-entropies, label formats, round trips, half precision, and
learning a span-copy task (with no-answer examples) to exact match >= 0.9."""

import os
import sys

import keras
import numpy as np
import pytest

from kerasbert.tasks import QuestionAnswerer
from kerasbert.preprocessing import decode_answers
from kerasbert.testing import TestCase
from kerasbert.testing import decided

sys.path.insert(0, os.path.dirname(__file__))
from task_fixtures import micro_backbone  # noqa: E402
from task_fixtures import random_features  # noqa: E402
from task_fixtures import span_copy  # noqa: E402
from task_fixtures import tiny_backbone  # noqa: E402
from slow_marks import slow_covered_by  # noqa: E402

B, T = 4, 12
LABELS = {"start_positions": np.array([0, 3, 5, 2], "int32"),
          "end_positions": np.array([0, 4, 5, 6], "int32")}


def features():
    return random_features(np.random.RandomState(0), B, T)


def log_softmax(z):
    z = np.asarray(z, "float64")
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


class TestQuestionAnswerer(TestCase):
    def test_outputs_mask_padding(self):
        model = QuestionAnswerer(micro_backbone())
        x = features()
        out = model(x)
        assert set(out) == {"start_logits", "end_logits"}
        for logits in out.values():
            assert tuple(logits.shape) == (B, T) and logits.dtype == "float32"
            logits = np.asarray(logits)
            pad = x["input_mask"] == 0
            assert pad.any()
            np.testing.assert_array_equal(logits[pad], -1e4)
            assert (np.abs(logits[~pad]) < 100).all()

    def test_loss_is_the_mean_of_start_and_end(self):
        model = QuestionAnswerer(micro_backbone(), dropout=0.0)
        model.compile()
        x = features()
        out = {k: np.asarray(v) for k, v in model(x).items()}
        expected = np.mean([
            -log_softmax(out[o])[np.arange(B), LABELS[l]].mean()
            for o, l in (("start_logits", "start_positions"), ("end_logits", "end_positions"))
        ])
        results = model.evaluate(x, LABELS, batch_size=B, verbose=0, return_dict=True)
        np.testing.assert_allclose(results["loss"], expected, rtol=1e-5)
        hits = (out["start_logits"].argmax(-1) == LABELS["start_positions"]).mean()
        # Hits are argmax decisions: evaluate's compiled graph may break a
        # near tie (top-2 margin under 1e-4) otherwise than the eager call.
        slack = (~decided(out["start_logits"], 1e-5)).mean()
        assert slack <= 1 / B, slack  # (at most one: the check still bites)
        assert abs(results["start_logits_accuracy"] - hits) <= slack + 1e-6
        assert "end_logits_accuracy" in results
        # A pair of arrays works too.
        pair = model.evaluate(x, (LABELS["start_positions"], LABELS["end_positions"]),
                              batch_size=B, verbose=0, return_dict=True)
        np.testing.assert_allclose(pair["loss"], expected, rtol=1e-5)
        with pytest.raises(KeyError, match="start_positions"):
            model.evaluate(x, {"start": LABELS["start_positions"]}, verbose=0)

    def test_task_basics(self):
        model = QuestionAnswerer(micro_backbone(), dropout=0.05)
        restored = self.run_task_test(model, features(), LABELS)
        assert restored.dropout == 0.05


# 79 s: 16 epochs of 1024 examples to exact match >= 0.9; the default suite
# fits, evaluates and round-trips the task, checks its loss, and decodes
# predicted windows back to character spans.
@slow_covered_by("tests/tasks/test_question_answerer.py::TestQuestionAnswerer::test_task_basics",
                 "tests/tasks/test_question_answerer.py::TestQuestionAnswerer::test_loss_is_the_mean_of_start_and_end",
                 "tests/tasks/test_raw_text_preprocessing.py::test_qa_predict_decodes_windows_back_to_character_spans")
def test_learns_span_copy():
    """[CLS] q [SEP] context [SEP] (8 context tokens): the answer starts
    where q occurs in the context and is 1 + q % 3 tokens long (its later
    tokens are middle/end pieces, as "##" pieces close a word); 25% of
    questions do not occur (no answer, label [CLS]). Decoded with the
    n-best search and the SQuAD v2 null threshold 0. Bound: exact match
    >= 0.9 over answers and no-answers.

    Measured over model seeds 1234-1249 at learning rate 1e-3: 0.996-1.000.
    (At 3e-3 six seeds gave 0.801-1.000: one under the bound, one at 0.918.)"""
    n, batch_size, epochs = 1024, 16, 16
    x, y, _, _, _ = span_copy(np.random.RandomState(0), n)
    x_val, _, contexts, offsets, golds = span_copy(np.random.RandomState(1), 256)
    # The bound holds on the measured model seeds, not on every suite seed:
    # the model seed is pinned to a measured one.
    keras.utils.set_random_seed(1234)
    model = QuestionAnswerer(tiny_backbone())
    model.compile(learning_rate=1e-3, num_train_steps=epochs * n // batch_size)
    model.fit(x, y, batch_size=batch_size, epochs=epochs, verbose=0)
    out = model(x_val)
    predictions = decode_answers(
        contexts, np.asarray(out["start_logits"]), np.asarray(out["end_logits"]),
        offsets, np.arange(len(contexts)), max_answer_length=30,
    )
    exact = np.mean([p.text == g for p, g in zip(predictions, golds)])
    no_answer = np.mean([p.text == "" for p, g in zip(predictions, golds) if g == ""])
    print(f"span copy exact match {exact:.3f} (no-answer accuracy {no_answer:.3f})")
    assert exact >= 0.9
