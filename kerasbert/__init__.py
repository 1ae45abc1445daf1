"""kerasbert: BERT and its family for Keras 3.

Sub-packages are imported on first use (`kerasbert.models`, ...), so
`import kerasbert` and `kerasbert --help` stay fast and the CLI can set up
logging before TensorFlow loads.

Saved models load in any process with `keras.saving.load_model(path)` once
`kerasbert` is imported (`kerasbert.keras_lookup`: each class is imported
when Keras first asks for it), or with `kerasbert.load_model(path)`, which
also says which file is not a kerasbert model (`kerasbert.saving`).
"""

import importlib

from kerasbert.sources import source as _source
from kerasbert import export_door as _export_door
from kerasbert import keras_lookup as _keras_lookup
from kerasbert.version import __version__

_SUBPACKAGES = (
    "convert",
    "data",
    "layers",
    "loading",
    "metrics",
    "models",
    "serving",
    "sources",
    "tasks",
    "testing",
    "text",
    "training",
)


# Top-level functions, also imported on first use.
_FUNCTIONS = ("load_model", "register_all")


def __getattr__(name):
    if name in _FUNCTIONS:
        from kerasbert import saving  # lazy: TensorFlow and every Keras class

        return getattr(saving, name)
    if name in _SUBPACKAGES:
        return importlib.import_module(f"kerasbert.{name}")
    raise AttributeError(f"module 'kerasbert' has no attribute {name!r}")


def _load_backbone(handle, dtype=None, **overrides):
    # lazy: the whole stack (TensorFlow, Keras, every family); `import
    # kerasbert` must stay instant
    from kerasbert.loading.backbones import load_backbone

    return load_backbone(handle, dtype=dtype, **overrides)


def _export_task(model, output, **options):
    # lazy: TensorFlow and the serving modules
    from kerasbert.serving.exporter import export_task

    return export_task(model, output, **options)


# The package root is the one place that knows every layer: it opens the
# doors through which the models layer (`Backbone.from_preset`) reaches the
# loaders of published weights above it, and the tasks layer
# (`Task.export`) the serving layer, without importing upwards.
_source.install_backbone_loader(_load_backbone)
_export_door.install_exporter(_export_task)
_keras_lookup.install()
