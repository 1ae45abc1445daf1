"""Start-up work that makes a kerasbert process cheaper to start.

`import tensorflow` (and with it Keras) tries a few optional packages for
features kerasbert never uses, and imports them whenever they are
installed: about 3 s of CPU in every process, a third of the whole
import. Each is guarded by `try: import X except ImportError`, so a finder
that refuses package X to the one module that wants it skips that import:

- scikit-learn (and SciPy), for Keras' sklearn wrappers
  (`keras.wrappers.SKLearnClassifier`, ...): about 1.2 s;
- JAX, for TensorFlow Lite's converter from JAX functions and a patch of
  old JAX versions in Keras' Orbax checkpoint callback: about 0.8 s (under
  KERAS_BACKEND=jax, Keras' backend imports JAX first, as it must);
- matplotlib.pyplot, for Keras' image-gallery plots: about 0.6 s;
- pandas, for Keras' `fit` on DataFrames (kerasbert passes none): 0.4 s;
- SciPy's sparse matrices, for TensorFlow's legacy tf.keras engine (not
  Keras 3's): 0.2 s.

Everyone else (our metrics and plots, seqeval, KerasTuner, Keras' JAX
backend) still imports those packages normally, on first use.

Installed by the console script and the thin scripts (kerasbert.cli) and
by the pretraining-data writer's forkserver (data/worker_preload.py): never
in a library user's process, whose Keras and TensorFlow must stay whole.
"""

import importlib.abc
import sys

#: Top-level package -> prefixes of the modules that are refused it.
SKIPPED = {
    "sklearn": ("keras.src.wrappers",),
    "jax": ("tensorflow.lite.", "keras.src.callbacks.orbax_checkpoint"),
    "matplotlib": ("keras.src.visualization",),
    "pandas": ("keras.src.trainers.data_adapters",),
    "scipy": ("tensorflow.python.keras.",),
}


class _SkipOptionalImports(importlib.abc.MetaPathFinder):
    """Raises ModuleNotFoundError for a package of SKIPPED when the import
    comes from the modules that SKIPPED refuses it; defers to the other
    finders otherwise."""

    def find_spec(self, name, path=None, target=None):
        importers = SKIPPED.get(name)
        if importers is None:
            return None
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_globals.get("__name__", "").startswith(importers):
                raise ModuleNotFoundError(
                    f"{name} is skipped for {', '.join(importers)} in kerasbert's commands "
                    "(kerasbert.fast_start)", name=name)
            frame = frame.f_back
        return None


def skip_unused_optional_imports():
    """Installs the finder, once per process (idempotent). A no-op for
    imports already done: call it before TensorFlow or Keras is imported."""
    if not any(isinstance(finder, _SkipOptionalImports) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SkipOptionalImports())
