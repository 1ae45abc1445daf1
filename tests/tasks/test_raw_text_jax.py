"""Raw text trains under KERAS_BACKEND=jax: tokenization runs in tf.data,
never in the compiled step, so the same task model fits, predicts, saves and
loads on JAX (a fresh process: the backend is chosen at import)."""

import json
import os
import subprocess
import sys

import numpy as np

from kerasbert.testing.sentence_models import write_sentence_model

from slow_marks import slow_covered_by

SCRIPT = """
import json, os, sys
import numpy as np
import keras
from kerasbert.tasks import TextClassifier, TokenClassifier
assert keras.backend.backend() == "jax"
directory = sys.argv[1]
keras.utils.set_random_seed(0)
texts = ["the cat sat on the mat", "hello world", "the dog sits on the rug", "a quick fox"] * 4
labels = ["animal", "greeting", "animal", "animal"] * 4
model = TextClassifier.from_preset(directory, num_classes=2)
loss = model.fit(texts, labels, epochs=2, batch_size=4, verbose=0).history["loss"]
probabilities = model.predict(texts[:2], verbose=0)
model.save("clf.keras")
again = keras.saving.load_model("clf.keras").predict(texts[:2], verbose=0)
words = [["the", "cat", "sat"], ["hello", "world"]] * 4
tags = [["O", "B-ANI", "O"], ["O", "O"]] * 4
tagger = TokenClassifier.from_preset(directory, num_labels=2)
tag_loss = tagger.fit(words, tags, epochs=1, batch_size=4, verbose=0).history["loss"]
per_word = tagger.predict(words[:2], verbose=0)
json.dump({"loss": loss, "probabilities": probabilities.tolist(), "again": again.tolist(),
           "tag_loss": tag_loss, "word_shapes": [list(p.shape) for p in per_word]},
          open("result.json", "w"))
"""


# 56 s (a classifier's ~15 s alone: JAX and from_preset start-up, then
# compiles): strings tokenized in tf.data feed JAX's compiled steps; the
# default suite fits each task on strings under TensorFlow and trains the
# task models under JAX.
@slow_covered_by(
    "tests/tasks/test_raw_text_lifecycle.py::test_fits_and_predicts_from_strings",
    "tests/tasks/test_tasks_without_tensorflow.py::test_a_text_classifier_trains_under_jax_without_tensorflow")
def test_raw_text_fits_under_jax(tmp_path):
    directory, _, _ = write_sentence_model(tmp_path / "published", positions=64,
                                           sentence_files=False)
    script = tmp_path / "script.py"
    script.write_text(SCRIPT, encoding="utf-8")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, str(script), directory], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert len(result["loss"]) == 2 and np.isfinite(result["loss"]).all()
    np.testing.assert_allclose(np.sum(result["probabilities"], -1), 1.0, atol=1e-6)
    np.testing.assert_allclose(result["again"], result["probabilities"], atol=1e-6)
    assert np.isfinite(result["tag_loss"]).all()
    assert result["word_shapes"] == [[3, 2], [2, 2]]
