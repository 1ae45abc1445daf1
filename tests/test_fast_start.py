"""kerasbert.fast_start: a command's process skips the optional imports
that TensorFlow and Keras try for features kerasbert never uses, and still
imports those packages normally for everyone else (our metrics, plots);
a library user's process keeps Keras whole."""

import json
import subprocess
import sys

from reliability.console import env

from kerasbert.fast_start import SKIPPED

# A command, then every skipped package used the way kerasbert and its
# dependencies use them, in the same process.
AFTER_A_COMMAND = """
import contextlib, io, json, sys
from kerasbert.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["presets"])
loaded_by_the_command = sorted(p for p in %r if p in sys.modules)

from kerasbert.metrics import glue_metrics
metrics = glue_metrics("mrpc", [0, 1, 1, 0], [0, 1, 0, 0])
from scipy import stats
import pandas
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.figure()
import jax.numpy as jnp
json.dump({"code": code, "loaded_by_the_command": loaded_by_the_command,
           "f1": metrics["f1"], "spearman": float(stats.spearmanr([1, 2, 3], [1, 2, 4])[0]),
           "frame": len(pandas.DataFrame({"a": [1, 2]})), "jax": int(jnp.arange(3).sum())},
          sys.stdout)
""" % (sorted(SKIPPED),)


def test_a_command_skips_them_and_everyone_else_still_imports_them(tmp_path):
    done = subprocess.run([sys.executable, "-c", AFTER_A_COMMAND], cwd=tmp_path, env=env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0 and result["loaded_by_the_command"] == []
    assert result["f1"] == 2 / 3 and result["spearman"] == 1.0
    assert result["frame"] == 2 and result["jax"] == 3


def test_a_library_users_keras_keeps_its_sklearn_wrappers():
    """This test process imported Keras (tests/conftest.py) without the
    finder, as a user's script does: the wrappers found scikit-learn."""
    from keras.src.wrappers import sklearn_wrapper

    assert sklearn_wrapper.sklearn is not None
    assert sklearn_wrapper.sklearn.__name__ == "sklearn"
