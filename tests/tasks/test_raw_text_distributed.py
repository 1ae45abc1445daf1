"""Raw text in `fit` under `tf.distribute` (issue 34, item 5): a task model
built in a strategy's scope by `from_preset` fits on strings, tokenized in
tf.data by its preprocessor, as the pretraining tests run their strategies.

1. MirroredStrategy over 2 logical CPU devices (`split_cpu`, in a fresh
   process: the split must come before TensorFlow initialises): a
   TextClassifier (string labels) and a TokenClassifier (word lists, string
   tags) fit, predict from strings, save a `.keras` file that loads and
   predicts the same; with dropout off, the 2-replica run gives the same
   losses and weights as one device (the replicas' gradients are combined
   right), also with global-norm clipping active at every step (the norm
   of the all-reduced gradient, not each replica's), and every variable,
   the optimizer's too (the first fit recompiles to size the recipe's
   schedule), is a MirroredVariable.
2. MultiWorkerMirroredStrategy, 2 worker processes on 127.0.0.1 (TF_CONFIG,
   free ports, restarted on other ports when one was taken:
   `kerasbert.testing.workers.run_workers`): each builds the model in the
   strategy's scope and fits on the same strings. Keras hands the dataset
   to `strategy.experimental_distribute_dataset`, which rebatches each
   global batch of 8 into the replicas' 4 and, since a dataset made from
   tensors cannot be sharded by file, shards it by DATA (TensorFlow's AUTO
   policy): each worker runs the whole pipeline (same shuffle seed) and
   keeps its half of every global batch. The test checks that split (the
   two halves partition the epoch), that both workers end with the same
   losses and weights, and that the chief's `.keras` file (every worker
   saves, as TensorFlow asks; only the chief's is kept) holds the trained
   weights and predicts from strings.

Keras 3.15 cannot `fit` under MultiWorkerMirroredStrategy by itself
(keras-team/keras#20329, tensorflow/tensorflow#72388); `Task` works around
both failures (kerasbert/tasks/task.py, "under MultiWorkerMirroredStrategy").
"""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from kerasbert.testing.sentence_models import write_sentence_model
from kerasbert.testing.workers import run_workers

from slow_marks import slow_covered_by

COMMON = """
import json, os, sys, time
import numpy as np
SUBJECTS = ["the cat", "a dog", "the fox", "a quick brown fox"]
VERBS = ["sat on the mat", "sits on the rug", "jumps over the lazy dog", "was in the world"]
TEXTS = [f"{s} {v}" for s in SUBJECTS for v in VERBS]  # 16 distinct texts
LABELS = ["rest" if v.startswith("s") else "move" for s in SUBJECTS for v in VERBS]
WORDS = [["the", "cat", "sat"], ["hello", "world"], ["a", "quick", "brown", "fox", "jumps"],
         ["the", "dog", "sits", "on", "the", "rug"]] * 4
TAGS = [["O", "B-ANI", "O"], ["O", "O"], ["O", "O", "O", "B-ANI", "O"],
        ["O", "B-ANI", "O", "O", "O", "O"]] * 4
NO_DROPOUT = dict(dropout=0.0, backbone_overrides={"dropout": 0.0})

def kinds(variables):
    return sorted({type(getattr(v, "value", v)).__name__ for v in variables})
"""

MIRRORED = COMMON + """
START = time.time()
import os
from kerasbert.training.strategies import split_cpu
split_cpu(2)  # before TensorFlow initialises its devices
import keras
import tensorflow as tf
from kerasbert.tasks import TextClassifier, TokenClassifier
from kerasbert.training.strategies import resolve_strategy
directory, case = sys.argv[1], sys.argv[2]
strategy = resolve_strategy("mirrored")  # the logical CPUs, by name
result = {"replicas": strategy.num_replicas_in_sync,
          "devices": list(strategy.extended.worker_devices), "seconds": {}}

def mark(name):
    result["seconds"][name] = round(time.time() - START, 1)

def classifier(scope):
    # In order (shuffle=False): under a strategy Keras draws one batch to
    # build the model before the epochs, which takes a shuffled run's first
    # order, so a shuffled run would not be comparable with one device.
    keras.utils.set_random_seed(0)
    with scope:
        model = TextClassifier.from_preset(directory, num_classes=2, **NO_DROPOUT)
    history = model.fit(TEXTS, LABELS, batch_size=8, epochs=2, shuffle=False, verbose=0)
    return model, history.history["loss"]

mark("imports")
if case == "classifier":
    model, loss = classifier(strategy.scope())
    mark("fit")
    result.update(
        loss=loss, same_strategy=model.distribute_strategy is strategy,
        weights=kinds(model.weights), optimizer=kinds(model.optimizer.variables),
        iterations=int(model.optimizer.iterations.numpy()),
        labels=model.preprocessor.label_names,
        predictions=model.predict(TEXTS[:3], verbose=0).tolist())
    model.save("classifier.keras")
    result["loaded"] = keras.saving.load_model("classifier.keras").predict(
        TEXTS[:3], verbose=0).tolist()
    mark("predict, save, load")
    one, loss = classifier(tf.distribute.get_strategy().scope())  # the default: one device
    result["one_device"] = {"loss": loss,
                            "replicas": one.distribute_strategy.num_replicas_in_sync,
                            "weights_gap": max(float(np.max(np.abs(a - b))) for a, b in
                                               zip(model.get_weights(), one.get_weights()))}
    mark("one-device fit")
    # Global-norm clipping active at every step (clipnorm 1e-3): the norm is
    # the all-reduced gradient's, so 2 replicas still train as one device;
    # Keras' own clipping (KERASBERT_TF_OPTIMIZER_PATHS=0) clips each
    # replica's half-batch gradient by its own norm.
    def clipped(scope, paths="1"):
        os.environ["KERASBERT_TF_OPTIMIZER_PATHS"] = paths
        keras.utils.set_random_seed(0)
        with scope:
            m = TextClassifier.from_preset(directory, num_classes=2, **NO_DROPOUT)
            m.compile(learning_rate=1e-2, warmup_steps=0, clipnorm=1e-3)
        m.fit(TEXTS, LABELS, batch_size=8, epochs=1, shuffle=False, verbose=0)
        return m.get_weights()

    def gap(a, b):
        return max(float(np.max(np.abs(u - v))) for u, v in zip(a, b))

    two, one = clipped(strategy.scope()), clipped(tf.distribute.get_strategy().scope())
    result["clipped"] = {"gap": gap(two, one),
                         "keras_gap": gap(clipped(strategy.scope(), "0"), one)}
    mark("clipped fits")
else:
    keras.utils.set_random_seed(0)
    with strategy.scope():
        tagger = TokenClassifier.from_preset(directory, num_labels=2)
    history = tagger.fit(WORDS, TAGS, batch_size=8, epochs=2, seed=0, verbose=0).history
    mark("fit")
    result.update(loss=history["loss"], weights=kinds(tagger.weights),
                  optimizer=kinds(tagger.optimizer.variables),
                  iterations=int(tagger.optimizer.iterations.numpy()),
                  labels=tagger.preprocessor.label_names,
                  predictions=[p.tolist() for p in tagger.predict(WORDS[:3], verbose=0)])
    mark("predict")
json.dump(result, open("result.json", "w"))
"""

WORKER = COMMON + """
START, seconds = time.time(), {}
import tempfile
import keras
import tensorflow as tf
from kerasbert.tasks import TextClassifier
from kerasbert.training.strategies import resolve_strategy, worker_info
directory = sys.argv[1]
strategy = resolve_strategy("multi_worker")  # from TF_CONFIG
is_chief, index, workers = worker_info(strategy)
seconds["imports"] = round(time.time() - START, 1)
keras.utils.set_random_seed(0)
with strategy.scope():
    model = TextClassifier.from_preset(directory, num_classes=2)
history = model.fit(TEXTS, LABELS, batch_size=8, epochs=2, seed=0, verbose=0).history
seconds["fit"] = round(time.time() - START, 1)

# What this worker reads of one epoch: the dataset `fit` builds, distributed
# as Keras distributes it (`experimental_distribute_dataset`).
dataset = model.preprocessor.dataset(TEXTS, LABELS, batch_size=8, shuffle=True, seed=0,
                                     num_labels=2)
rows = []
for features, labels in strategy.experimental_distribute_dataset(dataset):
    for ids in strategy.experimental_local_results(features["input_word_ids"]):
        rows += ids.numpy().tolist()

# Every worker saves (TensorFlow's rule for MWMS); only the chief's file is kept.
scratch = tempfile.TemporaryDirectory()
path = "model.keras" if is_chief else os.path.join(scratch.name, "model.keras")
model.save(path)
scratch.cleanup()
seconds["save"] = round(time.time() - START, 1)
np.savez(f"weights-{index}.npz", *model.get_weights())
result = {"index": index, "chief": is_chief, "workers": workers,
          "replicas": strategy.num_replicas_in_sync, "loss": history["loss"],
          "iterations": int(model.optimizer.iterations.numpy()),
          "weights": kinds(model.weights), "optimizer": kinds(model.optimizer.variables),
          "rows": rows}
if is_chief:  # its file, loaded outside the strategy, holds the trained model and tokenizer
    loaded = keras.saving.load_model(path)
    result["loaded"] = {
        "weights_gap": max(float(np.max(np.abs(a - b))) for a, b in
                           zip(model.get_weights(), loaded.get_weights())),
        "labels": loaded.preprocessor.label_names,
        "predictions": loaded.predict(TEXTS[:3], verbose=0).tolist()}
seconds["load"] = round(time.time() - START, 1)
result["seconds"] = seconds
json.dump(result, open(f"worker-{index}.json", "w"))
"""


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    directory, _, _ = write_sentence_model(tmp_path_factory.mktemp("published") / "bert",
                                           positions=64, sentence_files=False)
    return directory


def _script(folder, name, text):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name)
    with open(path, "w", encoding="utf-8") as f:
        f.write(textwrap.dedent(text))
    return path


def _mirrored(directory, folder, case):
    script = _script(folder, "mirrored.py", MIRRORED)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, script, directory, case], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((folder / "result.json").read_text())
    print(case, "seconds", result["seconds"])
    assert result["replicas"] == 2 and len(set(result["devices"])) == 2
    # Made in the scope, one copy per replica: the model's variables and the
    # optimizer's (the first fit's recompile, which sizes the schedule).
    assert result["weights"] == result["optimizer"] == ["MirroredVariable"]
    assert result["iterations"] == 4  # 2 epochs x 2 global batches of 8
    assert len(result["loss"]) == 2 and np.isfinite(result["loss"]).all()
    return result


# 58 s: a fresh process on 2 logical CPUs fits the classifier under
# MirroredStrategy, then 4 more fits to compare with one device (clipping on
# too); the default suite checks MirroredStrategy against one device on the
# pretrainer, fits tasks on strings, and fits from strings in a strategy's
# scope across two worker processes.
@slow_covered_by(
    "tests/tasks/test_bert_pretrainer.py::test_mirrored_strategy_matches_single_device",
    "tests/tasks/test_raw_text_lifecycle.py::test_fits_and_predicts_from_strings",
    "tests/tasks/test_raw_text_distributed.py::test_multi_worker_two_processes_fit_the_same_model_from_strings")
def test_mirrored_text_classifier_fits_predicts_and_saves_from_strings(published, tmp_path):
    result = _mirrored(published, tmp_path, "classifier")
    assert result["same_strategy"]
    assert result["labels"] == ["move", "rest"]
    np.testing.assert_allclose(np.sum(result["predictions"], -1), 1.0, atol=1e-6)
    np.testing.assert_allclose(result["loaded"], result["predictions"], atol=1e-6)
    # Two replicas of 4 examples train as one device on the batch of 8.
    one = result["one_device"]
    assert one["replicas"] == 1
    np.testing.assert_allclose(result["loss"], one["loss"], rtol=1e-5)
    assert one["weights_gap"] < 1e-5
    # With clipping active too: Keras alone would differ by far more.
    clipped = result["clipped"]
    assert clipped["gap"] < 1e-6 and clipped["keras_gap"] > 100 * max(clipped["gap"], 1e-7)


# 27 s: a fresh process on 2 logical CPUs fits the tagger under
# MirroredStrategy; the default suite fits the tagger on words with string
# tags in-process, and a classifier from strings across two workers.
@slow_covered_by(
    "tests/tasks/test_raw_text_lifecycle.py::test_fits_and_predicts_from_strings",
    "tests/tasks/test_raw_text_distributed.py::test_multi_worker_two_processes_fit_the_same_model_from_strings",
    "tests/tasks/test_bert_pretrainer.py::test_mirrored_strategy_matches_single_device")
def test_mirrored_token_classifier_fits_words_with_string_tags(published, tmp_path):
    result = _mirrored(published, tmp_path, "tagger")
    assert result["labels"] == ["B-ANI", "O"]
    assert [len(p) for p in result["predictions"]] == [3, 2, 5]  # one row per word
    for per_word in result["predictions"]:
        np.testing.assert_allclose(np.sum(per_word, -1), 1.0, atol=1e-6)


def test_multi_worker_two_processes_fit_the_same_model_from_strings(published, tmp_path):
    script = _script(tmp_path, "worker.py", WORKER)
    run_workers([sys.executable, script, published], tmp_path)
    results = [json.loads((tmp_path / f"worker-{i}.json").read_text()) for i in range(2)]
    chief, other = results
    assert chief["chief"] and not other["chief"]
    for result in results:
        assert result["workers"] == 2 and result["replicas"] == 2
        assert result["weights"] == result["optimizer"] == ["MirroredVariable"]
        assert result["iterations"] == 4  # 2 epochs x 2 global batches of 8
        assert len(result["loss"]) == 2 and np.isfinite(result["loss"]).all()

    # DATA sharding: each worker keeps half of every global batch, and the
    # halves partition the epoch (same shuffle seed on both workers).
    assert len(chief["rows"]) == len(other["rows"]) == 8
    assert len({tuple(r) for r in chief["rows"] + other["rows"]}) == 16

    # One model, trained together: the same logs and weights on both workers.
    assert chief["loss"] == other["loss"]
    mine, theirs = (np.load(tmp_path / f"weights-{i}.npz") for i in range(2))
    assert len(mine.files) == len(theirs.files)
    for name in mine.files:
        np.testing.assert_array_equal(mine[name], theirs[name])

    # Only the chief's file is kept: the trained weights, the label names
    # and the tokenizer (it predicts from strings).
    assert sorted(p.name for p in tmp_path.glob("*.keras")) == ["model.keras"]
    loaded = chief["loaded"]
    assert loaded["weights_gap"] == 0.0
    assert loaded["labels"] == ["move", "rest"]
    np.testing.assert_allclose(np.sum(loaded["predictions"], -1), 1.0, atol=1e-6)
    print(chief["seconds"], other["seconds"])
