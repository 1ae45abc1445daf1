"""ELMo's pretraining: forward and backward language-model losses over a
word vocabulary (full and sampled softmax), on a tiny corpus whose loss
falls."""

import os
import tempfile

import keras
import numpy as np

from kerasbert.data.elmo_lm_data import build_word_vocabulary
from kerasbert.data.elmo_lm_data import elmo_lm_dataset
from kerasbert.models import ElmoBackbone
from kerasbert.tasks.elmo_pretrainer import ElmoPretrainer
from kerasbert.tasks.elmo_pretrainer import lm_targets

from slow_marks import slow_covered_by

TINY = dict(lstm_dim=16, projection_dim=8, num_layers=1, num_highway=1,
            filters=[[1, 8], [2, 8], [3, 8]], max_characters_per_token=12)
CORPUS = ["the cat sat on the mat .", "the dog sat on the log .", "a cat saw a dog .",
          "the dog saw the cat on the mat ."] * 4


def test_targets():
    ids = np.array([[5, 6, 7, 0], [8, 0, 0, 0]])
    mask = np.array([[1, 1, 1, 0], [1, 0, 0, 0]])
    forward, backward = (np.asarray(t) for t in lm_targets(ids, mask, 0, 1))
    np.testing.assert_array_equal(forward[0, :3], [6, 7, 1])  # ... then </S>
    np.testing.assert_array_equal(backward[0, :3], [0, 5, 6])  # <S> then ...
    assert forward[1, 0] == 1 and backward[1, 0] == 0


def _train(num_sampled, steps):
    keras.utils.set_random_seed(3)
    vocabulary = build_word_vocabulary(CORPUS)
    assert vocabulary[:4] == ["<S>", "</S>", "<UNK>", "the"]
    data = elmo_lm_dataset(CORPUS, vocabulary, batch_size=8, max_words=10, max_characters=12,
                           shuffle=True, seed=1, repeat=True)
    batch = next(iter(data))
    assert batch["input_char_ids"].shape == (8, 10, 12)
    model = ElmoPretrainer(ElmoBackbone(**TINY), len(vocabulary), num_sampled=num_sampled)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    before = model.evaluate(batch, verbose=0, return_dict=True)
    history = model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0).history
    after = model.evaluate(batch, verbose=0, return_dict=True)
    return model, batch, before, after, history


def test_full_softmax_loss_falls_and_round_trips():
    model, batch, before, after, history = _train(0, 60)
    assert after["loss"] < 0.65 * before["loss"], (before, after)
    assert {"forward_loss", "backward_loss", "lm_accuracy"} <= set(after)
    assert after["lm_accuracy"] > 0.3
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "p.keras")
        model.save(path)
        restored = keras.saving.load_model(path, safe_mode=True)
    np.testing.assert_allclose(np.asarray(restored(batch)["forward"]),
                               np.asarray(model(batch)["forward"]), atol=1e-6)


# 18 s (tracing the training step): the sampled softmax's step; the default suite trains
# with the full softmax and checks the sampler's log-uniform draws.
@slow_covered_by("tests/models/elmo/test_elmo_pretrainer.py::test_full_softmax_loss_falls_and_round_trips",
                 "tests/models/elmo/test_elmo_pretrain_cli.py::test_log_uniform_draws_follow_the_proposal")
def test_sampled_softmax_trains():
    _, _, before, after, history = _train(8, 60)
    assert np.isfinite(history["loss"]).all()
    assert after["loss"] < 0.85 * before["loss"], (before, after)  # scored on the full softmax
