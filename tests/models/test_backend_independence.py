"""Model code must run on every Keras backend: no TensorFlow in it."""

import ast
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

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


JAX_SCRIPT = """
import numpy as np, keras
assert keras.config.backend() == "jax"
from kerasbert.models import BertBackbone
model = BertBackbone(vocabulary_size=30, num_layers=2, num_heads=2,
                     hidden_dim=8, intermediate_dim=16, max_sequence_length=10)
ids = np.arange(12, dtype="int32").reshape(2, 6) % 30
mask = np.array([[1] * 6, [1] * 2 + [0] * 4], "int32")
out = model({"input_word_ids": ids, "input_mask": mask,
             "input_type_ids": np.zeros_like(ids)})
assert out["sequence_output"].shape == (2, 6, 8)
assert np.isfinite(np.asarray(out["pooled_output"])).all()
model.compile(optimizer="adam", loss="mse")
print("ok", type(out["sequence_output"]).__module__)
"""


@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None, reason="jax is not installed"
)
def test_backbone_runs_under_jax():
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    result = subprocess.run(
        [sys.executable, "-c", JAX_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("ok jax")
