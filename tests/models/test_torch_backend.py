"""The PyTorch backend, run (KERAS_BACKEND=torch, the CPU build of the
`torch` extra): every family's backbone equals the TensorFlow backend on the
same weights, raw-text fine-tuning of classification, tagging and QA gives
the TensorFlow losses from the same weights, a `.keras` file crosses the two
backends both ways, and generation (GPT, the Reformer, the Transformer's
beam search) runs. The backend is chosen at import, so the torch side runs
in a fresh process; the TensorFlow side runs here or in its own process.

The `test` extra installs torch (`make test` runs this file); `make
test-torch` installs the `torch` extra alone and runs it; without torch the
file skips, saying why."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import keras

from kerasbert import models
from kerasbert.testing.sentence_models import write_sentence_model

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="torch is not installed (make test-torch installs it)")

TOLERANCE = 1e-5

TINY = dict(vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16,
            max_sequence_length=48)
#: {family: extra constructor arguments}: every family that reads token ids.
FAMILIES = {
    "BertBackbone": {}, "RobertaBackbone": {}, "DistilBertBackbone": {},
    "AlbertBackbone": {"embedding_dim": 4}, "ElectraBackbone": {"embedding_dim": 4},
    # blocks of 4 and one random block: 40 tokens take the block-sparse path
    "BigBirdBackbone": {"block_size": 4, "num_random_blocks": 1}, "GptBackbone": {},
    "ReformerBackbone": {"num_buckets": 4, "lsh_chunk_length": 8, "local_chunk_length": 8},
    # a window of 8 (4 each side): 40 tokens take the blocked sliding-window path
    "ModernBertBackbone": {"local_attention": 8},
}


def token_inputs():
    """Two rows of 40 tokens, the second padded after 25."""
    ids = (np.arange(80, dtype="int32").reshape(2, 40) * 7) % 30
    mask = np.array([[1] * 40, [1] * 25 + [0] * 15], "int32")
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}


def family_cases():
    """{name: (backbone, inputs)} of every family, ELMo and the Transformer
    included, built here (TensorFlow) from a fixed seed."""
    keras.utils.set_random_seed(0)
    cases = {name: (getattr(models, name)(**TINY, **extra), token_inputs())
             for name, extra in FAMILIES.items()}
    cases["ElmoBackbone"] = (
        models.ElmoBackbone(lstm_dim=16, projection_dim=8, num_highway=1,
                            filters=[[1, 4], [2, 4]], max_characters_per_token=6),
        {"input_char_ids": (np.arange(2 * 5 * 6, dtype="int32").reshape(2, 5, 6) % 200) + 1,
         "input_mask": np.array([[1] * 5, [1] * 3 + [0] * 2], "int32")})
    ids = token_inputs()
    cases["TransformerBackbone"] = (
        models.TransformerBackbone(**TINY),
        {"encoder_token_ids": ids["input_word_ids"], "encoder_padding_mask": ids["input_mask"],
         "decoder_token_ids": ids["input_word_ids"][:, :12],
         "decoder_padding_mask": ids["input_mask"][:, :12]})
    return cases


def _arrays(outputs):
    """{name: array} of a backbone's outputs (lists flattened by index)."""
    if not isinstance(outputs, dict):
        return {"output": np.asarray(outputs)}
    found = {}
    for key, value in outputs.items():
        if isinstance(value, (list, tuple)):
            found.update({f"{key}.{i}": np.asarray(v) for i, v in enumerate(value)})
        else:
            found[key] = np.asarray(value)
    return found


def run_under_torch(script, *args, cwd):
    env = dict(os.environ, KERAS_BACKEND="torch", TF_CPP_MIN_LOG_LEVEL="2",
               CUDA_VISIBLE_DEVICES="")
    result = subprocess.run([sys.executable, "-c", script, *map(str, args)], env=env, cwd=cwd,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return result.stdout


BACKBONES = """
import json, sys
import numpy as np, keras
from kerasbert import models
assert keras.config.backend() == "torch"
case = json.load(open("cases.json"))
worst = {}
for name, config in case.items():
    backbone = getattr(models, name).from_config(config)
    # by path: the order of `weights` is the backend's (PyTorch tracks the
    # sublayers a functional model sets before its __init__ afterwards)
    weights = np.load(f"{name}.weights.npz")
    assert sorted(weights.files) == sorted(w.path for w in backbone.weights), name
    for variable in backbone.weights:
        variable.assign(weights[variable.path])
    inputs = dict(np.load(f"{name}.inputs.npz"))
    want = np.load(f"{name}.outputs.npz")
    got = backbone(inputs)
    got = got if isinstance(got, dict) else {"output": got}
    for key in want.files:
        part, _, index = key.partition(".")
        value = got[part][int(index)] if index else got[part]
        value = np.asarray(keras.ops.convert_to_numpy(value))
        worst[f"{name}:{key}"] = float(np.max(np.abs(value - want[key])))
json.dump(worst, open("torch.json", "w"))
print("ok torch")
"""


def test_every_family_equals_tensorflow_under_torch(tmp_path):
    configs = {}
    for name, (backbone, inputs) in family_cases().items():
        configs[name] = backbone.get_config()
        np.savez(tmp_path / f"{name}.weights.npz",
                 **{w.path: np.asarray(w.numpy()) for w in backbone.weights})
        np.savez(tmp_path / f"{name}.inputs.npz", **inputs)
        np.savez(tmp_path / f"{name}.outputs.npz", **_arrays(backbone(inputs)))
    (tmp_path / "cases.json").write_text(json.dumps(configs))
    assert run_under_torch(BACKBONES, cwd=tmp_path).strip().endswith("ok torch")
    worst = json.loads((tmp_path / "torch.json").read_text())
    assert {key.split(":")[0] for key in worst} == set(configs)
    assert max(worst.values()) < TOLERANCE, {k: v for k, v in worst.items() if v >= TOLERANCE}


# The same raw-text fine-tuning under either backend: no dropout (the two
# backends draw different masks) and no shuffling; the TensorFlow run keeps
# the freshly built weights, the PyTorch run starts from them.
FINE_TUNE = """
import json, os, sys
import numpy as np, keras
from kerasbert.tasks import QuestionAnswerer, TextClassifier, TokenClassifier
folder, backend = sys.argv[1], keras.config.backend()
CASES = {
    "classification": (["the cat sat on the mat", "hello world", "the dog sits on the rug",
                        "a quick fox"] * 2, ["animal", "greeting", "animal", "animal"] * 2),
    "tagging": ([["the", "cat", "sat"], ["hello", "world"], ["a", "quick", "fox"]] * 2,
                [["O", "B-ANI", "O"], ["O", "O"], ["O", "O", "B-ANI"]] * 2),
    "qa": ((["what sat ?", "who jumps ?"] * 3,
            ["the cat sat on the mat .", "a quick brown fox jumps over the lazy dog ."] * 3),
           [{"text": "the cat", "answer_start": 0}, {"text": "fox", "answer_start": 14}] * 3),
}
off = dict(dropout=0.0, backbone_overrides={"dropout": 0.0})
BUILD = {
    "classification": lambda: TextClassifier.from_preset(folder, label_names=["animal",
                                                                             "greeting"], **off),
    "tagging": lambda: TokenClassifier.from_preset(folder, label_names=["O", "B-ANI"], **off),
    "qa": lambda: QuestionAnswerer.from_preset(folder, sequence_length=24, max_query_length=8,
                                               doc_stride=8, **off),
}
result = {}
for name, build in BUILD.items():
    keras.utils.set_random_seed(0)
    model = build()
    if backend == "tensorflow":
        np.savez(f"{name}.init.npz", **{w.path: np.asarray(w.numpy()) for w in model.weights})
    else:  # by path (the backends order `weights` differently)
        init = np.load(f"{name}.init.npz")
        for variable in model.weights:
            variable.assign(init[variable.path])
    x, y = CASES[name]
    history = model.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0).history
    predicted = model.predict(x[:2] if name != "qa" else (x[0][:2], x[1][:2]), verbose=0)
    result[name] = {"loss": [float(v) for v in history["loss"]]}
    if name == "classification":
        result[name]["predicted"] = np.asarray(predicted).tolist()
        model.save(f"clf.{backend}.keras")
        other = "torch" if backend == "tensorflow" else "tensorflow"
        if os.path.exists(f"clf.{other}.keras"):  # the first run finds none
            loaded = keras.saving.load_model(f"clf.{other}.keras")
            result[name]["other_predicted"] = np.asarray(loaded.predict(x[:2], verbose=0)).tolist()
json.dump(result, open(f"{backend}.json", "w"))
print("ok", backend)
"""


def test_raw_text_fine_tuning_matches_tensorflow_and_keras_files_cross(tmp_path):
    write_sentence_model(tmp_path / "model")
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="2")
    first = subprocess.run([sys.executable, "-c", FINE_TUNE, str(tmp_path / "model")], env=env,
                           cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-4000:]
    assert run_under_torch(FINE_TUNE, tmp_path / "model", cwd=tmp_path).strip().endswith(
        "ok torch")
    tf_run = json.loads((tmp_path / "tensorflow.json").read_text())
    torch_run = json.loads((tmp_path / "torch.json").read_text())
    for name in ("classification", "tagging", "qa"):
        np.testing.assert_allclose(torch_run[name]["loss"], tf_run[name]["loss"], rtol=1e-4,
                                   err_msg=name)
    # The TensorFlow .keras file under PyTorch predicts what TensorFlow did.
    np.testing.assert_allclose(torch_run["classification"]["other_predicted"],
                               tf_run["classification"]["predicted"], atol=1e-5)
    # ... and the PyTorch file under TensorFlow what PyTorch did (this process).
    loaded = keras.saving.load_model(tmp_path / "clf.torch.keras")
    np.testing.assert_allclose(
        loaded.predict(["the cat sat on the mat", "hello world"], verbose=0),
        torch_run["classification"]["predicted"], atol=1e-5)


GENERATE = """
import numpy as np, keras
from kerasbert import models
from kerasbert.tasks import CausalLM, Seq2SeqLM
assert keras.config.backend() == "torch"
keras.utils.set_random_seed(0)
tiny = dict(vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16,
            max_sequence_length=48)
for backbone in (models.GptBackbone(**tiny),
                 models.ReformerBackbone(**tiny, num_buckets=4, lsh_chunk_length=8,
                                         local_chunk_length=8)):
    out = CausalLM(backbone).generate([[5, 6, 7], [8, 9]], max_new_tokens=5)
    assert [len(row) for row in out] == [5, 5], out
translator = Seq2SeqLM(models.TransformerBackbone(**tiny))
ids = (np.arange(24, dtype="int32").reshape(2, 12) % 27) + 3
out = np.asarray(translator.generate(ids, np.ones_like(ids), max_length=6, start_id=1, end_id=2,
                                     strategy="beam", beam_size=3))
assert out.shape[0] == 2, out.shape
print("ok torch")
"""


def test_generation_and_beam_search_run_under_torch(tmp_path):
    # the script's own asserts: 5 new tokens per prompt, a beam per source
    assert run_under_torch(GENERATE, cwd=tmp_path).strip().endswith("ok torch")
