"""`kerasbert export --precision bfloat16` (and `model.export(precision=)`):
the served model holds bfloat16 weights and computes in bfloat16, every
output stays float32, and it agrees with the float32 export: the same
labels wherever the float32 margin is clear, probabilities within 2e-2,
served by a fresh process with only tensorflow + tensorflow_text."""

import json
import os

import numpy as np
import pytest

from reliability.console import kerasbert
from serving_fixtures import run_fresh
from serving_fixtures import shared_export
from test_export import TEXTS
from test_export import _inputs
from kerasbert.testing.decisions import assert_same_decisions

SERVE = """
spec = json.load(open(sys.argv[1]))
result = {}
for name, (path, inputs) in spec.items():
    loaded = tf.saved_model.load(path)
    out = loaded.signatures["serving_default"](
        **{k: tf.constant(v, tf.string) for k, v in inputs.items()})
    result[name] = {"outputs": {k: v.numpy().tolist() for k, v in out.items()
                                if v.dtype != tf.string},
                    "dtypes": sorted({v.dtype.name for v in out.values()}),
                    "variables": sorted({d.name for d in tf.train.load_checkpoint(
                        os.path.join(path, "variables", "variables"))
                        .get_variable_to_dtype_map().values()})}
_check_imports()
print(json.dumps(result))
"""
# Short texts and a batch of longer ones: the bfloat16 model runs trimmed too.
REQUESTS = [TEXTS, ["the quick brown fox jumps over the lazy dog " * 3, "mary works at the bank",
                    "Paris", "a cat, a dog and a bird sat on the mat in London"]]


def test_bfloat16_export_agrees_with_float32(tmp_path, shared_builds):
    ft, default = shared_export(shared_builds, "classification")
    out = tmp_path / "export"
    done = kerasbert("export", "--model", ft, "--output", str(out), "--precision", "bfloat16",
                     cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    path = str(out / "1")
    with open(os.path.join(path, "assets.extra", "export.json")) as f:
        assert json.load(f)["graph"]["precision"] == "bfloat16"
    spec = {}
    for i, texts in enumerate(REQUESTS):
        spec[f"float32/{i}"] = (default["path"], _inputs("classification", texts))
        spec[f"bfloat16/{i}"] = (path, _inputs("classification", texts))
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    served = json.loads(run_fresh(SERVE, tmp_path / "spec.json").strip().splitlines()[-1])
    for i in range(len(REQUESTS)):
        want, got = served[f"float32/{i}"], served[f"bfloat16/{i}"]
        assert got["dtypes"] == want["dtypes"] and "bfloat16" not in got["dtypes"]
        assert "bfloat16" in got["variables"] and "bfloat16" not in want["variables"]
        assert_same_decisions(want["outputs"]["probabilities"], got["outputs"]["probabilities"],
                              got["outputs"]["label_id"], atol=2e-2, min_decided=0)


@pytest.mark.parametrize("task_type", ["tagging", "qa"])
def test_token_level_tasks_in_bfloat16(tmp_path, shared_builds, task_type):
    """Tags and answer spans: the bfloat16 model's per-token logits are
    padded back to T as the float32 model's are."""
    import tensorflow as tf
    from kerasbert.serving.exporter import export_finetuned

    ft, default = shared_export(shared_builds, task_type)
    path = export_finetuned(ft, str(tmp_path / "bf16"), precision="bfloat16")["path"]
    inputs = {k: tf.constant(v) for k, v in _inputs(task_type, TEXTS).items()}
    want = tf.saved_model.load(default["path"]).signatures["serving_default"](**inputs)
    got = tf.saved_model.load(path).signatures["serving_default"](**inputs)
    assert sorted(got) == sorted(want)
    for name, value in want.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape, name
        if value.dtype.is_floating:
            values = np.asarray(got[name])
            assert np.isfinite(values).all(), name


def test_model_export_precision_and_refusals(tmp_path, shared_builds):
    from kerasbert import runs
    from kerasbert.serving.graph_options import GraphOptions
    from kerasbert.tasks.preprocessor_factory import preprocessor_from_run

    ft, _ = shared_export(shared_builds, "classification")
    run = runs.open_finetuned(ft)
    model = run.load_model(runs.MODEL)
    model.preprocessor = preprocessor_from_run(model, run)
    with pytest.raises(ValueError, match="precision 'float16'"):
        GraphOptions(precision="float16")
    done = kerasbert("export", "--model", ft, "--output", str(tmp_path / "x"),
                     "--precision", "int8", cwd=tmp_path)
    assert done.returncode == 2 and "--precision" in done.stderr
    assert not (tmp_path / "x").exists()
    result = model.export(str(tmp_path / "m"), precision="bfloat16")
    with open(os.path.join(result["path"], "assets.extra", "export.json")) as f:
        assert json.load(f)["graph"]["precision"] == "bfloat16"
    assert model.dtype_policy.name == "float32"  # the copy is bfloat16, the model untouched
