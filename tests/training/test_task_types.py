"""The task type registry (kerasbert.tasks.task_types): every built-in entry
is complete, and a new task type needs only one new file that registers it:
fine-tuning, evaluation and export then work for it without other edits."""

import importlib.util
import json
import os
import random

import numpy as np
import pytest

import pretrain_data as pd
from kerasbert.data.finetuning import task_formats
from kerasbert.data.finetuning.task_formats import TASK_TYPES
from kerasbert.errors import UsageError
from kerasbert.serving import task_servings
from kerasbert.tasks import task_types
from kerasbert.testing.files import write_csv

from slow_marks import slow_covered_by

# The whole of a toy task type: ordinal ratings (classes in order) scored by
# the mean distance between the predicted and the gold class.
TOY_TASK_FILE = '''
import numpy as np

from kerasbert.data.finetuning.task_formats import TaskFormat
from kerasbert.serving.classification_serving import ClassificationServing
from kerasbert.serving.task_servings import register_serving
from kerasbert.tasks import task_types
from kerasbert.tasks.text_classifier import TextClassifier


def build(task_type, backbone, features, dropout):
    return TextClassifier(backbone, num_classes=len(features.label_names), dropout=dropout)


def evaluate(task, data, features, outputs, options):
    gold, predicted = np.asarray(features.y), np.asarray(outputs).argmax(-1)
    return {"mean_class_distance": float(np.abs(gold - predicted).mean()),
            "accuracy": float((gold == predicted).mean())}


ORDINAL = task_types.register(task_types.TaskType(
    TaskFormat("ordinal", example="text", label="class"), build, evaluate,
    main_metric="mean_class_distance"))
register_serving("ordinal", ClassificationServing)
'''

RATING = {"the cat": "low", "a dog": "low", "the small bird": "mid"}


def write_ratings(path, n, seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        subject = rng.choice(pd.SUBJECTS)
        rows.append([f"{subject} {rng.choice(pd.VERBS)} {rng.choice(pd.OBJECTS)}",
                     RATING.get(subject, "high")])
    return write_csv(path, ["sentence", "label"], rows)


@pytest.mark.parametrize("name", TASK_TYPES)
def test_every_built_in_type_is_complete(name):
    entry = task_types.get(name)
    assert entry.name == name and entry.format is task_formats.task_format(name)
    assert callable(entry.build) and callable(entry.evaluate)
    serving = task_servings.serving_class(name)
    assert callable(serving.for_preprocessor) and callable(serving.export_info)
    assert entry.main_metric


def test_unknown_type_names_the_registered_ones():
    with pytest.raises(UsageError, match="'sentiment'.*classification, pair, regression"):
        task_types.get("sentiment")


# 15 s: a type registered from a file outside the package is fine-tuned, evaluated and
# exported; the default suite runs the built-in types through the same registries.
@slow_covered_by("tests/training/test_task_types.py::test_every_built_in_type_is_complete",
                 "tests/training/test_finetune_cli.py::test_every_task_type_runs_end_to_end",
                 "tests/serving/test_export.py::test_regression_score_matches_keras")
def test_a_new_task_type_is_one_file(tmp_path, monkeypatch):
    import keras
    import tensorflow as tf

    from kerasbert.models import BertBackbone
    from kerasbert.serving.exporter import export_finetuned
    from kerasbert.training.configs import FinetuneConfig
    from kerasbert.training.finetune import run_evaluation
    from kerasbert.training.finetune import run_finetuning

    # The registries are process-wide: the toy type leaves with the test.
    monkeypatch.setattr(task_types, "_TASK_TYPES", dict(task_types._TASK_TYPES))
    monkeypatch.setattr(task_formats, "_FORMATS", dict(task_formats._FORMATS))
    monkeypatch.setattr(task_servings, "_SERVINGS", dict(task_servings._SERVINGS))
    toy_file = tmp_path / "toy_task.py"
    toy_file.write_text(TOY_TASK_FILE, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("toy_task", toy_file)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert task_types.get("ordinal").main_metric == "mean_class_distance"

    vocab, _ = pd.make_data(str(tmp_path / "data"))
    size = len(open(vocab, encoding="utf-8").read().splitlines())
    backbone_file = str(tmp_path / "backbone.keras")
    keras.utils.set_random_seed(0)
    BertBackbone(vocabulary_size=size, num_layers=1, num_heads=2, hidden_dim=32,
                 intermediate_dim=64, max_sequence_length=32).save(backbone_file)
    train = write_ratings(tmp_path / "train.csv", 96, 0)
    valid = write_ratings(tmp_path / "valid.csv", 32, 1)
    out = str(tmp_path / "ft")
    result = run_finetuning(FinetuneConfig(
        task=f"csv:{train}", validation=valid, task_type="ordinal", output_dir=out,
        vocab=vocab, backbone=backbone_file, epochs=2, batch_size=16, learning_rate=3e-3,
        sequence_length=16, progress=False))
    assert result["task_type"] == "ordinal"
    assert set(result["metrics"]) == {"mean_class_distance", "accuracy"}
    config = json.load(open(os.path.join(out, "config.json"), encoding="utf-8"))
    assert config["task_type"] == "ordinal" and config["label_names"] == ["high", "low", "mid"]

    again = run_evaluation(out, split=valid)
    assert again == pytest.approx(result["metrics"], abs=1e-6)

    exported = export_finetuned(out, str(tmp_path / "serving"))
    info = json.load(open(os.path.join(exported["path"], "assets.extra", "export.json"),
                          encoding="utf-8"))
    assert info["task_type"] == "ordinal" and info["inputs"] == ["text"]
    served = tf.saved_model.load(exported["path"]).signatures["serving_default"](
        text=tf.constant(["the cat eats the apple"]))
    probabilities = served["probabilities"].numpy()
    assert probabilities.shape == (1, 3)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-5)
