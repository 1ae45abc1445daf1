"""Python source that, run first in a fresh interpreter, makes importing
TensorFlow, tensorflow-text and keras-hub fail as on a machine that has only
JAX and Keras (an accelerator host): tests prepend it to their scripts."""

HIDE_TENSORFLOW = """
import importlib.abc, sys

class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] in ("tensorflow", "tensorflow_text", "keras_hub"):
            raise ModuleNotFoundError(f"No module named {name!r} (hidden by the test)",
                                      name=name)
        return None

sys.meta_path.insert(0, _NotInstalled())
"""
