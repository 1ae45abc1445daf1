"""The feature-based use of ELMo in Python: a frozen biLM whose learned
scalar mix feeds the tagging and classification task models, trained on raw
words and texts, saved and reloaded."""

import os
import tempfile

import keras
import numpy as np

from kerasbert.models import ElmoBackbone
from kerasbert.preprocessing.elmo_inputs import elmo_preprocessor
from kerasbert.preprocessing.elmo_text_classifier_preprocessor import (
    ElmoTextClassifierPreprocessor)
from kerasbert.preprocessing.elmo_token_classifier_preprocessor import (
    ElmoTokenClassifierPreprocessor)
from kerasbert.preprocessing.text_classifier_preprocessor import TextClassifierPreprocessor
from kerasbert.preprocessing.token_classifier_preprocessor import TokenClassifierPreprocessor
from kerasbert.tasks import TextClassifier
from kerasbert.tasks import TokenClassifier

TINY = dict(lstm_dim=16, projection_dim=16, num_layers=1, num_highway=1,
            filters=[[1, 16], [2, 16]], max_characters_per_token=10, freeze_bilm=True)
WORDS = [["Alice", "met", "Bob", "in", "Paris"], ["Seoul", "is", "big"],
         ["Bob", "likes", "Seoul"], ["a", "b", "c", "d", "e", "f", "g", "h", "Paris", "x"]]
TAGS = [["PER", "O", "PER", "O", "LOC"], ["LOC", "O", "O"], ["PER", "O", "LOC"],
        ["O"] * 8 + ["LOC", "O"]]
TEXTS = ["good film, truly good", "bad plot and bad acting", "good good good", "so bad"]
LABELS = ["pos", "neg", "pos", "neg"]


def _reload(model):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.keras")
        model.save(path)
        return keras.saving.load_model(path, safe_mode=True)


def test_counterparts():
    assert elmo_preprocessor(TokenClassifierPreprocessor) is ElmoTokenClassifierPreprocessor
    assert elmo_preprocessor(TextClassifierPreprocessor) is ElmoTextClassifierPreprocessor


def test_tagging_on_a_frozen_elmo():
    keras.utils.set_random_seed(1)
    backbone = ElmoBackbone(**TINY)
    preprocessor = ElmoTokenClassifierPreprocessor(sequence_length=8,
                                                   label_names=["O", "PER", "LOC"],
                                                   max_characters=10)
    model = TokenClassifier(backbone, num_labels=3, preprocessor=preprocessor, dropout=0.0)
    frozen = [w.numpy().copy() for w in backbone.char_cnn.weights]
    mix = backbone.scalar_mix.mix_weights.numpy().copy()
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    history = model.fit(WORDS, TAGS, batch_size=4, epochs=20, shuffle=False, verbose=0).history
    assert history["loss"][-1] < 0.8 * history["loss"][0], history["loss"]
    # The biLM stayed as it was; the scalar mix learned.
    for before, after in zip(frozen, backbone.char_cnn.weights):
        np.testing.assert_array_equal(before, after.numpy())
    assert np.abs(backbone.scalar_mix.mix_weights.numpy() - mix).max() > 1e-3
    probabilities = model.predict(WORDS)
    assert [p.shape for p in probabilities] == [(5, 3), (3, 3), (3, 3), (10, 3)]
    assert np.isnan(probabilities[3][8:]).all()  # past T = 8 words: no prediction
    restored = _reload(model)
    for a, b in zip(probabilities, restored.predict(WORDS)):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_classification_on_a_frozen_elmo():
    keras.utils.set_random_seed(2)
    backbone = ElmoBackbone(**TINY)
    preprocessor = ElmoTextClassifierPreprocessor(sequence_length=6, max_characters=10)
    model = TextClassifier(backbone, num_classes=2, preprocessor=preprocessor, dropout=0.0)
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    history = model.fit(TEXTS, LABELS, batch_size=4, epochs=20, shuffle=False, verbose=0).history
    assert history["loss"][-1] < 0.8 * history["loss"][0], history["loss"]
    assert len(backbone.trainable_weights) == 2
    probabilities = model.predict(TEXTS)
    assert probabilities.shape == (4, 2)
    np.testing.assert_allclose(probabilities, _reload(model).predict(TEXTS), atol=1e-6)
    try:
        model.predict((TEXTS, TEXTS))
    except Exception as err:  # a UsageError naming the problem
        assert "single texts" in str(err)
    else:
        raise AssertionError("a pair was accepted")
