"""Model code must run on every Keras backend: no TensorFlow in it."""

import ast
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

from slow_marks import slow_covered_by

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "kerasbert"


def _imported_modules(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


@pytest.mark.parametrize("subpackage", ["layers", "models"])
def test_model_code_never_imports_tensorflow(subpackage):
    files = sorted((PACKAGE / subpackage).rglob("*.py"))
    assert files
    offenders = [
        f"{path.relative_to(PACKAGE)} imports {module}"
        for path in files
        for module in _imported_modules(path)
        if module.split(".")[0] in ("tensorflow", "tf_keras", "tensorflow_text")
    ]
    assert not offenders, offenders
    for path in files:
        assert "tf." not in path.read_text().replace("kerasbert", ""), path


# What every JAX script starts from: two rows of 40 tokens (the second
# padded after 25) and a tiny configuration.
JAX_PRELUDE = """
import numpy as np, keras
assert keras.config.backend() == "jax"
from kerasbert import models
from kerasbert.tasks import BertPretrainer, CausalLM

ids = (np.arange(80, dtype="int32").reshape(2, 40) * 7) % 30
mask = np.array([[1] * 40, [1] * 25 + [0] * 15], "int32")
inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}
tiny = dict(vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8,
            intermediate_dim=16, max_sequence_length=48)
"""

# Runs each backbone of `families` ({class name: extra arguments}) on the inputs.
RUN_FAMILIES = """
for name, extra in families.items():
    out = getattr(models, name)(**tiny, **extra)(inputs)
    assert out["sequence_output"].shape == (2, 40, 8), name
    assert np.isfinite(np.asarray(out["pooled_output"])).all(), name
    assert len(out["encoder_outputs"]) == 2, name
"""

# GPT is causal under JAX too: position 10 ignores what follows it.
GPT_IS_CAUSAL = """
gpt = models.GptBackbone(**tiny)
changed = dict(inputs, input_word_ids=np.where(np.arange(40) > 10, 3, ids).astype("int32"))
a, b = gpt(inputs)["sequence_output"], gpt(changed)["sequence_output"]
assert np.allclose(np.asarray(a)[:, :11], np.asarray(b)[:, :11], atol=1e-6)
"""

JAX_SCRIPT = JAX_PRELUDE + """
families = {
    "BertBackbone": {}, "RobertaBackbone": {}, "DistilBertBackbone": {},
    "AlbertBackbone": {"embedding_dim": 4}, "ElectraBackbone": {"embedding_dim": 4},
    # Blocks of 4, one random block: 40 tokens take the block-sparse path.
    "BigBirdBackbone": {"block_size": 4, "num_random_blocks": 1}, "GptBackbone": {},
    # a window of 8 (4 each side): 40 tokens take the blocked sliding-window path
    "ModernBertBackbone": {"local_attention": 8},
}
""" + RUN_FAMILIES + GPT_IS_CAUSAL + """
# The pretrainers: BertPretrainer's sparse last layer, the causal LM.
bert = models.BertBackbone(**tiny)
batch = dict(inputs, masked_lm_positions=np.array([[1, 5, 9]] * 2, "int32"))
sparse = BertPretrainer(bert, objectives=("mlm",))
full = BertPretrainer(bert, objectives=("mlm",), sparse_last_layer=False)
full.set_weights(sparse.get_weights())
assert np.allclose(np.asarray(sparse(batch)["mlm_logits"]), np.asarray(full(batch)["mlm_logits"]),
                   atol=1e-5)
logits = CausalLM(gpt)(inputs)
# The Reformer: LSH and local attention, and a training step through its
# reversible layers (differentiated by JAX itself; the recomputing backward
# pass is TensorFlow's).
reformer = models.ReformerBackbone(**tiny, num_buckets=4, lsh_chunk_length=8,
                                   local_chunk_length=8)
assert reformer(inputs)["sequence_output"].shape == (2, 40, 16)
lm = CausalLM(reformer)
lm.compile(optimizer="adam")
losses = [float(lm.train_on_batch(inputs, return_dict=True)["loss"]) for _ in range(3)]
assert np.isfinite(losses).all() and losses[-1] < losses[0], losses
print("ok", type(out["sequence_output"]).__module__, type(logits).__name__)
"""

SMALL_JAX_SCRIPT = JAX_PRELUDE + """
families = {"BertBackbone": {}, "RobertaBackbone": {}, "DistilBertBackbone": {},
            "GptBackbone": {}}
""" + RUN_FAMILIES + GPT_IS_CAUSAL + """
print("ok", type(out["sequence_output"]).__module__)
"""


def _run_under_jax(script, **env):
    """Runs `script` in a Python whose Keras backend is JAX on the CPU;
    returns what it printed ("ok jax..." when its checks passed)."""
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", **env)
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None, reason="jax is not installed"
)
def test_encoders_and_gpt_run_under_jax():
    """SMALL_JAX_SCRIPT: BERT, RoBERTa, DistilBERT and GPT (causal) under
    JAX, XLA at its cheapest optimisation level (these calls only need to
    run); the slow test below adds every other family, the pretrainers and a
    Reformer training step."""
    printed = _run_under_jax(SMALL_JAX_SCRIPT, XLA_FLAGS="--xla_backend_optimization_level=0")
    assert printed.startswith("ok jax")  # the outputs are JAX arrays


# 57 s: every family (BigBird's sparse path, ALBERT, ELECTRA, the Reformer), the
# pretrainers and a Reformer training step under JAX; the default suite runs the BERT
# encoders and GPT under JAX and the portable kernels.
@slow_covered_by("tests/models/test_backend_independence.py::test_encoders_and_gpt_run_under_jax",
                 "tests/models/test_backend_independence.py::test_model_code_never_imports_tensorflow",
                 "tests/test_kernels.py::test_portable_forms_under_jax")
@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None, reason="jax is not installed"
)
def test_backbone_runs_under_jax():
    assert _run_under_jax(JAX_SCRIPT).startswith("ok jax")
