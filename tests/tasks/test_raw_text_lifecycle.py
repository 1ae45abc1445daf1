"""Keras-native tasks on raw text, as a user's scripts run them: one fresh
process per step, each in its own working directory, with the installed
package.

1. `train`: from a published-layout directory (config.json,
   model.safetensors, vocab.txt, tokenizer_config.json),
   `Task.from_preset(DIR, ...)` -> `fit` on lists of strings with string
   labels -> `predict` on strings -> `model.save("TYPE.keras")` ->
   `model.export("export/TYPE")`, for every task type.
2. `load`: `import kerasbert.tasks` then `keras.saving.load_model("TYPE.keras")`
   predicts the same outputs from strings, to 1e-6.
3. `serve`: only tensorflow and tensorflow_text load each SavedModel, whose
   `serving_default` takes the same raw text and gives the same
   probabilities / spans.
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kerasbert.testing.sentence_models import write_sentence_model

from slow_marks import slow_covered_by

COMMON = """
import json, sys
import numpy as np
CASES = {
    "classification": dict(
        x=["the cat sat on the mat", "hello world", "the dog sits on the rug", "a quick fox"] * 6,
        y=["animal", "greeting", "animal", "animal"] * 6),
    "pair": dict(
        x=(["the cat sat", "hello", "the dog", "a fox"] * 6, ["on the mat", "world", "sits", "jumps"] * 6),
        y=["yes", "no", "yes", "no"] * 6),
    "tagging": dict(
        x=[["the", "cat", "sat"], ["hello", "world"], ["a", "quick", "brown", "fox", "jumps"]] * 6,
        y=[["O", "B-ANI", "O"], ["O", "O"], ["O", "O", "O", "B-ANI", "O"]] * 6),
    "multiple_choice": dict(
        x=(["the cat sat", "hello world"] * 6, [["on the mat", "jumps over", "hello"], ["world", "the dog", "a fox"]] * 6),
        y=[0, 1] * 6),
    "qa": dict(
        x=(["what sat ?", "who jumps ?"] * 6,
           ["the cat sat on the mat .", "a quick brown fox jumps over the lazy dog ."] * 6),
        y=[{"text": "the cat", "answer_start": 0}, {"text": "fox", "answer_start": 14}] * 6),
}
PREDICT = {name: (tuple(v[:2] for v in case["x"]) if isinstance(case["x"], tuple) else case["x"][:3])
           for name, case in CASES.items()}

def plain(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value
"""

TRAIN = COMMON + """
import os
import keras
from kerasbert.tasks import MultipleChoice, QuestionAnswerer, TextClassifier, TokenClassifier
directory = sys.argv[1]
keras.utils.set_random_seed(0)
models = {
    "classification": lambda: TextClassifier.from_preset(directory, num_classes=2),
    "pair": lambda: TextClassifier.from_preset(directory, label_names=["no", "yes"]),
    "tagging": lambda: TokenClassifier.from_preset(directory, num_labels=2),
    "multiple_choice": lambda: MultipleChoice.from_preset(directory, num_choices=3),
    "qa": lambda: QuestionAnswerer.from_preset(directory, sequence_length=32, max_query_length=8,
                                               doc_stride=8),
}
result = {}
for name, build in models.items():
    model = build()
    case = CASES[name]
    history = model.fit(case["x"], case["y"], epochs=2, batch_size=4, verbose=0).history
    model.save(f"{name}.keras")
    exported = model.export(f"export/{name}")
    result[name] = {"loss": history["loss"], "predictions": plain(model.predict(PREDICT[name], verbose=0)),
                    "labels": model.preprocessor.label_names, "export": os.path.abspath(exported["path"]),
                    "task_type": model.preprocessor.task_type}
json.dump(result, open("trained.json", "w"))
"""

LOAD = COMMON + """
import keras
import kerasbert.tasks  # registers the classes, as `import keras_hub` does
assert "kerasbert.training" not in sys.modules
train_dir = sys.argv[1]
result = {}
for name in CASES:
    model = keras.saving.load_model(f"{train_dir}/{name}.keras")
    result[name] = plain(model.predict(PREDICT[name], verbose=0))
# A saved task is a handle too: its backbone and tokenizer start a new task.
tagger = kerasbert.tasks.TokenClassifier.from_preset(f"{train_dir}/classification.keras",
                                                     label_names=["O", "X", "Y"])
result["from_preset"] = {"tokenizer": tagger.preprocessor.tokenizer.vocabulary_size,
                         "classes": tagger.num_labels,
                         "words": plain(tagger.predict([["the", "cat"]], verbose=0))}
json.dump(result, open("loaded.json", "w"))
"""

SERVE = COMMON + """
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the tokenizer's ops)
trained = json.load(open(sys.argv[1]))
result = {}
for name in CASES:
    serve = tf.saved_model.load(trained[name]["export"]).signatures["serving_default"]
    x = PREDICT[name]
    if name == "classification":
        out = serve(text=tf.constant(x))
    elif name == "pair":
        out = serve(text_a=tf.constant(x[0]), text_b=tf.constant(x[1]))
    elif name == "tagging":
        out = serve(text=tf.constant([" ".join(words) for words in x]))
    elif name == "multiple_choice":
        out = serve(context=tf.constant(x[0]), choices=tf.constant(x[1]))
    else:
        out = serve(question=tf.constant(x[0]), context=tf.constant(x[1]))
    result[name] = {k: plain(v.numpy()) for k, v in out.items() if v.dtype != tf.string}
    result[name].update({k: [s.decode() for s in np.asarray(v.numpy()).reshape(-1)]
                         for k, v in out.items() if v.dtype == tf.string})
assert not any(m.startswith("kerasbert") for m in sys.modules)
json.dump(result, open("served.json", "w"))
"""

NAMES = ("classification", "pair", "tagging", "multiple_choice", "qa")


def _run(script, folder, *args, env=None):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "script.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(script))
    done = subprocess.run([sys.executable, path, *map(str, args)], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def lifecycle(tmp_path_factory):
    root = tmp_path_factory.mktemp("raw_text")
    directory, _, _ = write_sentence_model(root / "published", positions=64, sentence_files=False)
    _run(TRAIN, root / "train", directory)
    trained = json.loads((root / "train" / "trained.json").read_text())
    _run(LOAD, root / "load", root / "train")
    loaded = json.loads((root / "load" / "loaded.json").read_text())
    _run(SERVE, root / "serve", root / "train" / "trained.json")
    served = json.loads((root / "serve" / "served.json").read_text())
    return trained, loaded, served


def _close(a, b, atol):
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _close(a[key], b[key], atol)
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y, atol)
    elif isinstance(a, float):
        assert abs(a - b) <= atol or (np.isnan(a) and np.isnan(b)), (a, b)
    else:
        assert a == b


# The module's fixture (three fresh processes: every task type trained,
# exported, loaded and served) takes 142 s, charged to its first test; each
# of its tests is slow. The default suite runs each task type's fit,
# predict, save and load in-process, and a saved task's export and its use
# as a handle (the tests at the end of this file).

# 142 s (the fixture): the saved task as a handle in a fresh process.
@slow_covered_by("tests/tasks/test_raw_text_lifecycle.py::test_a_saved_task_exports_and_is_a_handle_in_process")
def test_a_saved_task_is_a_handle(lifecycle):
    _, loaded, _ = lifecycle
    started = loaded["from_preset"]
    assert started["tokenizer"] == 35 and started["classes"] == 3
    assert np.asarray(started["words"][0]).shape == (2, 3)


# The fixture's cost: one process per step, and the SavedModels served with
# only tensorflow + tensorflow_text.
@slow_covered_by("tests/tasks/test_raw_text_lifecycle.py::test_fits_and_predicts_from_strings",
                 "tests/tasks/test_raw_text_lifecycle.py::test_a_saved_task_exports_and_is_a_handle_in_process",
                 "tests/serving/test_export.py::test_probabilities_match_keras")
@pytest.mark.parametrize("name", NAMES)
def test_trained_saved_loaded_and_served_from_strings(lifecycle, name):
    trained, loaded, served = lifecycle
    run = trained[name]
    assert all(np.isfinite(run["loss"])) and len(run["loss"]) == 2
    predictions = run["predictions"]
    _close(predictions, loaded[name], 1e-6)
    out = served[name]
    if name in ("classification", "pair"):
        assert run["task_type"] == name
        assert run["labels"] == (["animal", "greeting"] if name == "classification" else ["no", "yes"])
        np.testing.assert_allclose(out["probabilities"], predictions, atol=1e-5)
        assert out["label"] == [run["labels"][i] for i in np.argmax(predictions, -1)]
    elif name == "tagging":
        assert run["labels"] == ["B-ANI", "O"]
        for row, words in enumerate(predictions):
            np.testing.assert_allclose(np.asarray(out["token_probabilities"])[row, :len(words)],
                                       words, atol=1e-5)
    elif name == "multiple_choice":
        np.testing.assert_allclose(out["probabilities"], predictions, atol=1e-5)
    else:
        assert out["answer"] == [p["answer"] for p in predictions]
        assert out["start_char"] == [p["start_char"] for p in predictions]
        np.testing.assert_allclose(out["score"], [p["score"] for p in predictions], atol=1e-4)


# --- the same steps in this process (the default suite) -----------------------


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    directory, _, _ = write_sentence_model(tmp_path_factory.mktemp("raw_text_here") / "published",
                                           positions=64, sentence_files=False)
    return directory


def _common():
    """COMMON's CASES, PREDICT and plain()."""
    namespace = {}
    exec(textwrap.dedent(COMMON), namespace)
    return namespace


BUILD = {
    "classification": lambda tasks, d: tasks.TextClassifier.from_preset(d, num_classes=2),
    "tagging": lambda tasks, d: tasks.TokenClassifier.from_preset(d, num_labels=2),
    "multiple_choice": lambda tasks, d: tasks.MultipleChoice.from_preset(d, num_choices=3),
    "qa": lambda tasks, d: tasks.QuestionAnswerer.from_preset(d, sequence_length=32,
                                                              max_query_length=8, doc_stride=8),
}


@pytest.mark.parametrize("name", sorted(BUILD))
def test_fits_and_predicts_from_strings(published, name):
    """TRAIN's steps for one task class, in this process, for one epoch:
    `from_preset`, `fit` on strings (string labels and tags, answer spans),
    `predict` from strings. (Pairs: TRAIN's "pair" case is the
    TextClassifier's, and test_raw_text_preprocessing packs string pairs.)"""
    import keras

    from kerasbert import tasks

    common = _common()
    case, x, plain = common["CASES"][name], common["PREDICT"][name], common["plain"]
    keras.utils.set_random_seed(0)
    model = BUILD[name](tasks, published)
    loss = model.fit(case["x"], case["y"], epochs=1, batch_size=4, verbose=0).history["loss"]
    assert len(loss) == 1 and np.isfinite(loss).all()
    predictions = plain(model.predict(x, verbose=0))
    if name == "classification":
        assert model.preprocessor.label_names == ["animal", "greeting"]
        assert np.asarray(predictions).shape == (3, 2)
        np.testing.assert_allclose(np.sum(predictions, -1), 1.0, atol=1e-6)
    elif name == "tagging":
        assert model.preprocessor.label_names == ["B-ANI", "O"]
        assert [np.asarray(p).shape for p in predictions] == [(len(w), 2) for w in x]
    elif name == "multiple_choice":
        assert np.asarray(predictions).shape == (2, 3)
        np.testing.assert_allclose(np.sum(predictions, -1), 1.0, atol=1e-6)
    else:
        assert len(predictions) == 2
        for row, context in zip(predictions, x[1]):
            start, end = row["start_char"], row["end_char"]
            assert row["answer"] == (context[start:end] if start >= 0 else "")


def test_a_saved_task_exports_and_is_a_handle_in_process(published, tmp_path):
    """A classifier made by `from_preset`: its `.keras` file loads and
    predicts the same from strings; `model.export`'s SavedModel, loaded
    here, takes raw text and gives `predict`'s probabilities and labels; the
    `.keras` file starts a TokenClassifier with its backbone and tokenizer."""
    import keras
    import tensorflow as tf

    from kerasbert import tasks

    texts = ["the cat sat on the mat", "hello world", "a quick fox"]
    keras.utils.set_random_seed(0)
    model = tasks.TextClassifier.from_preset(published, label_names=["animal", "greeting"])
    predictions = model.predict(texts, verbose=0)
    path = str(tmp_path / "classification.keras")
    model.save(path)
    np.testing.assert_allclose(keras.saving.load_model(path).predict(texts, verbose=0),
                               predictions, atol=1e-6)
    exported = model.export(str(tmp_path / "export" / "classification"))
    serve = tf.saved_model.load(exported["path"]).signatures["serving_default"]
    out = serve(text=tf.constant(texts))
    np.testing.assert_allclose(out["probabilities"].numpy(), predictions, atol=1e-5)
    assert [s.decode() for s in out["label"].numpy()] == [
        ["animal", "greeting"][i] for i in np.argmax(predictions, -1)]
    tagger = tasks.TokenClassifier.from_preset(path, label_names=["O", "X", "Y"])
    assert tagger.preprocessor.tokenizer.vocabulary_size == 35 and tagger.num_labels == 3
    assert np.asarray(tagger.predict([["the", "cat"]], verbose=0)[0]).shape == (2, 3)
