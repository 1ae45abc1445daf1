"""TokenClassifier: first-sub-token weighting (loss = sum(w*ce)/sum(w),
weighted accuracy), word decoding, round trips, half precision, learning a
rule-labelled tagging task to entity F1 >= 0.9."""

import os
import sys

import keras
import numpy as np
import pytest

from kerasbert.tasks import TokenClassifier
from kerasbert.tasks import decode_word_labels
from kerasbert.tasks import first_subtoken_weights
from kerasbert.testing import TestCase
from kerasbert.testing import decided

sys.path.insert(0, os.path.dirname(__file__))
from task_fixtures import TAGS  # noqa: E402
from task_fixtures import entity_f1  # noqa: E402
from task_fixtures import micro_backbone  # noqa: E402
from task_fixtures import rule_tagged  # noqa: E402
from task_fixtures import tiny_backbone  # noqa: E402

B, T, NUM_LABELS = 3, 12, 3
WORD_IDS = np.array([
    [-1, 0, 1, 1, 2, 2, 2, -1, -1, -1, -1, -1],
    [-1, 0, 0, 1, 2, 3, -1, -1, -1, -1, -1, -1],
    [-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, -1, -1],
])


def batch():
    rng = np.random.RandomState(0)
    x = {
        "input_word_ids": rng.randint(3, 100, (B, T)).astype("int32"),
        "input_mask": (WORD_IDS != -1).astype("int32"),
        "input_type_ids": np.zeros((B, T), "int32"),
    }
    x["input_mask"][:, 0] = 1  # [CLS]
    y = rng.randint(0, NUM_LABELS, (B, T)).astype("int32")
    return x, y, first_subtoken_weights(WORD_IDS)


def log_softmax(z):
    z = np.asarray(z, "float64")
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def test_first_subtoken_weights():
    w = first_subtoken_weights(WORD_IDS)
    np.testing.assert_array_equal(w[0], [0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(w[1], [0, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    assert w.dtype == np.float32 and w[2].sum() == 9


def test_decode_word_labels():
    logits = np.zeros((1, 7, 3))
    preds = [0, 1, 2, 0, 1, 1, 0]  # per token
    logits[0, np.arange(7), preds] = 1.0
    word_ids = [[-1, 0, 1, 1, 2, 2, -1]]
    assert decode_word_labels(logits, word_ids) == [[1, 2, 1]]
    assert decode_word_labels(np.array([preds]), word_ids, TAGS) == [
        ["B-PER", "I-PER", "B-PER"]]
    assert TokenClassifier.decode(logits, word_ids) == [[1, 2, 1]]
    with pytest.raises(ValueError, match="do not match"):
        decode_word_labels(logits, [[0, 1]])


class TestTokenClassifier(TestCase):
    def test_outputs(self):
        model = TokenClassifier(micro_backbone(), num_labels=NUM_LABELS)
        x, _, _ = batch()
        logits = model(x)
        assert tuple(logits.shape) == (B, T, NUM_LABELS) and logits.dtype == "float32"
        with pytest.raises(ValueError, match="num_labels"):
            TokenClassifier(micro_backbone(), num_labels=0)

    def test_loss_and_accuracy_count_only_first_subtokens(self):
        model = TokenClassifier(micro_backbone(), num_labels=NUM_LABELS, dropout=0.0)
        model.compile()
        x, y, w = batch()
        logits = np.asarray(model(x))
        ce = -np.take_along_axis(log_softmax(logits), y[..., None], -1)[..., 0]
        hits = logits.argmax(-1) == y
        results = model.evaluate(x, y, sample_weight=w, batch_size=B, verbose=0,
                                 return_dict=True)
        # The mean over the weighted positions, not divided by B * T.
        np.testing.assert_allclose(results["loss"], (w * ce).sum() / w.sum(), rtol=1e-5)
        # Hits are argmax decisions: evaluate's compiled graph may break a
        # near tie (top-2 margin under 1e-4) otherwise than the eager call.
        slack = (w * ~decided(logits, 1e-5)).sum() / w.sum()
        assert slack <= 1 / w.sum(), slack  # (at most one: the check still bites)
        assert abs(results["accuracy"] - (w * hits).sum() / w.sum()) <= slack + 1e-6
        # Labels under weight 0 do not matter.
        y2 = np.where(w > 0, y, (y + 1) % NUM_LABELS)
        again = model.evaluate(x, y2, sample_weight=w, batch_size=B, verbose=0,
                               return_dict=True)
        np.testing.assert_allclose(again["loss"], results["loss"], rtol=1e-6)
        np.testing.assert_allclose(again["accuracy"], results["accuracy"])

    def test_task_basics(self):
        x, y, w = batch()
        model = TokenClassifier(micro_backbone(), num_labels=NUM_LABELS)
        restored = self.run_task_test(model, x, y, sample_weight=w)
        assert restored.num_labels == NUM_LABELS
        assert restored.loss.reduction == "mean_with_sample_weight"


def test_learns_rule_labelled_entities():
    """Words whose first token is in 10..19 are entities, PER if the
    sentence holds the trigger token anywhere, LOC if not; 40% of words
    have a second sub-token (weight 0, ignored). Bound: entity F1 (exact
    type and span, over words) >= 0.9 (measured: 1.000 for all 22 model
    seeds tried, 1234-1255)."""
    n, batch_size, epochs = 512, 16, 6
    shape = dict(words=6, length=16, entity_rate=0.5)
    x, y, w, _, _ = rule_tagged(np.random.RandomState(0), n, **shape)
    x_val, _, _, word_ids, gold = rule_tagged(np.random.RandomState(1), 256, **shape)
    # The bound holds on the measured model seeds, not on every suite seed:
    # the model seed is pinned to a measured one.
    keras.utils.set_random_seed(1234)
    model = TokenClassifier(tiny_backbone(), num_labels=len(TAGS))
    model.compile(learning_rate=3e-3, num_train_steps=epochs * n // batch_size)
    model.fit(x, y, sample_weight=w, batch_size=batch_size, epochs=epochs, verbose=0)
    predicted = decode_word_labels(np.asarray(model(x_val)), word_ids, TAGS)
    f1 = entity_f1(gold, predicted)
    print(f"tagging entity F1 {f1:.3f}")
    assert f1 >= 0.9
