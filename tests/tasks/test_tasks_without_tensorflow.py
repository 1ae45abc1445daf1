"""The task models need neither TensorFlow, tensorflow-text nor keras-hub
under KERAS_BACKEND=jax (issue 35: the accelerator check runs where only
JAX and Keras are installed). A fresh process whose imports of those three
fail, as on such a machine, imports `kerasbert.tasks`, builds each
fine-tuning task on a tiny backbone and trains a step on token-id dicts
through Keras' own `train_on_batch`. Only the preprocessors (raw text in
tf.data) need TensorFlow, and they load when first asked for."""

import json
import os
import subprocess
import sys

import numpy as np

from kerasbert.testing.without_tensorflow import HIDE_TENSORFLOW

from slow_marks import slow_covered_by

TASKS = ("TextClassifier", "TokenClassifier", "QuestionAnswerer", "MultipleChoice")

SCRIPT = HIDE_TENSORFLOW + """
import json
import keras
import numpy as np
import kerasbert.tasks
from kerasbert.models import BertBackbone
from kerasbert.tasks import MultipleChoice, QuestionAnswerer, TextClassifier, TokenClassifier

assert keras.backend.backend() == "jax"
keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
B, T, V = 4, 16, 100

def ids(*shape):
    return {"input_word_ids": rng.integers(1, V, shape).astype("int32"),
            "input_mask": np.ones(shape, "int32"), "input_type_ids": np.zeros(shape, "int32")}

def backbone():
    return BertBackbone(vocabulary_size=V, num_layers=1, num_heads=2, hidden_dim=16,
                        intermediate_dim=32, max_sequence_length=T)

cases = {
    "TextClassifier": (lambda: TextClassifier(backbone(), num_classes=3),
                       ids(B, T), rng.integers(0, 3, (B,))),
    "TokenClassifier": (lambda: TokenClassifier(backbone(), num_labels=5),
                        ids(B, T), rng.integers(0, 5, (B, T))),
    "QuestionAnswerer": (lambda: QuestionAnswerer(backbone()), ids(B, T),
                         {"start_logits": rng.integers(0, T, (B,)),
                          "end_logits": rng.integers(0, T, (B,))}),
    "MultipleChoice": (lambda: MultipleChoice(backbone(), num_choices=2),
                       ids(B, 2, T), rng.integers(0, 2, (B,))),
}
result = {}
for name in sys.argv[1].split(","):  # the task models to train
    make, x, y = cases[name]
    model = make()
    model.compile()
    result[name] = model.train_on_batch(x, y, return_dict=True)["loss"]
result["unregistered"] = [name for name in kerasbert.tasks.__all__
                        if name != "Task" and isinstance(getattr(kerasbert.tasks, name), type)
                        and keras.saving.get_registered_object(f"kerasbert>{name}") is None
                        and issubclass(getattr(kerasbert.tasks, name), keras.Model)]
try:
    TextClassifier.preprocessor_class  # raw text: tf.data, so TensorFlow
except ModuleNotFoundError as err:
    result["preprocessor"] = err.name
result["loaded"] = sorted(m for m in ("tensorflow", "tensorflow_text", "keras_hub")
                          if m in sys.modules)
print(json.dumps(result))
"""


def _train_under_jax(tmp_path, names):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # XLA:CPU's cheapest optimisation level: these steps only need to run.
    env.update(KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_backend_optimization_level=0")
    done = subprocess.run([sys.executable, "-c", SCRIPT, ",".join(names)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_text_classifier_trains_under_jax_without_tensorflow(tmp_path):
    """SCRIPT with one task model, the TextClassifier: it trains a step, every
    task class is registered, and neither TensorFlow, tensorflow-text nor
    keras-hub is loaded."""
    result = _train_under_jax(tmp_path, ["TextClassifier"])
    assert np.isfinite(result["TextClassifier"]) and result["TextClassifier"] > 0, result
    assert result["unregistered"] == []
    assert result["preprocessor"] == "tensorflow"
    assert result["loaded"] == []


# 23 s: a train step of each of the four task models, each its own XLA
# compile; the default suite trains the TextClassifier in the same script
# and fits every task type on token ids under TensorFlow.
@slow_covered_by(
    "tests/tasks/test_tasks_without_tensorflow.py::test_a_text_classifier_trains_under_jax_without_tensorflow",
    "tests/tasks/test_token_classifier.py::TestTokenClassifier::test_task_basics",
    "tests/tasks/test_question_answerer.py::TestQuestionAnswerer::test_task_basics",
    "tests/tasks/test_multiple_choice.py::TestMultipleChoice::test_task_basics")
def test_task_models_train_under_jax_without_tensorflow(tmp_path):
    result = _train_under_jax(tmp_path, TASKS)
    for name in ("TextClassifier", "TokenClassifier", "QuestionAnswerer", "MultipleChoice"):
        assert np.isfinite(result[name]) and result[name] > 0, (name, result)
    assert result["unregistered"] == []  # every task model class, for load_model
    assert result["preprocessor"] == "tensorflow"  # asked for, it needs TensorFlow
    assert result["loaded"] == []
