"""kerasbert: BERT and its family for Keras 3.

Sub-packages are imported on first use (`kerasbert.models`, ...), so
`import kerasbert` and `kerasbert --help` stay fast and the CLI can set up
logging before TensorFlow loads.

Saved models load in any process with `kerasbert.load_model(path)` (it
registers every kerasbert class with Keras first; see kerasbert.saving).
"""

import importlib

from kerasbert.version import __version__

_SUBPACKAGES = (
    "convert",
    "data",
    "layers",
    "metrics",
    "models",
    "serving",
    "tasks",
    "testing",
    "text",
    "training",
)


# Top-level functions, also imported on first use.
_FUNCTIONS = {"load_model": "kerasbert.saving", "register_all": "kerasbert.saving"}


def __getattr__(name):
    if name in _FUNCTIONS:
        return getattr(importlib.import_module(_FUNCTIONS[name]), name)
    if name in _SUBPACKAGES:
        return importlib.import_module(f"kerasbert.{name}")
    raise AttributeError(f"module 'kerasbert' has no attribute {name!r}")
