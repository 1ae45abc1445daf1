"""`keras.saving.load_model` after a bare `import kerasbert`.

Keras finds a saved custom class by its registered name ("kerasbert>
TextClassifier") in its table of custom objects, which a class enters when
the module defining it is imported. kerasbert imports its sub-packages on
first use (so `import kerasbert` and `kerasbert --help` stay instant), so in
a fresh process

    import kerasbert, keras
    keras.saving.load_model("clf.keras")

would find nothing. The package root calls `install()`: once Keras is
imported (now, or later by anyone), each class kerasbert registers gets an
entry in Keras's table that imports its module when Keras first uses it.
Nothing of kerasbert is imported before then, and the classes and modules
are read from the source files (`registered_classes`), not from a second
list to keep in step.

This module sits at the top of the house with the package root: it imports
any kerasbert module, by name, when Keras asks for one of its classes.
"""

import importlib
import importlib.abc
import importlib.util
import os
import re
import sys

PACKAGE = "kerasbert"

#: The one way the package registers a Keras class (tests/test_saving.py
#: holds every class to it).
_REGISTERED = re.compile(
    r'^@keras\.saving\.register_keras_serializable\(package="kerasbert"\)\s*\nclass (\w+)', re.M)


def registered_classes(root=None):
    """{registered name: module} of every class the package registers
    with Keras ("kerasbert>BertBackbone": "kerasbert.models.bert.
    bert_backbone"), read from the source files under `root` (default: this
    package's folder)."""
    root = root or os.path.dirname(os.path.abspath(__file__))
    found = {}
    for folder, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                classes = _REGISTERED.findall(f.read())
            parts = os.path.relpath(path[:-3], root).split(os.sep)
            module = ".".join([PACKAGE] + [p for p in parts if p != "__init__"])
            found.update({f"{PACKAGE}>{cls}": module for cls in classes})
    return found


class _ClassOnFirstUse:
    """Stands in Keras's table for a class until Keras uses it: any
    attribute (`from_config`, ...) or call imports the class's module, whose
    decorator then replaces this entry with the class itself."""

    def __init__(self, module, class_name):
        self._module = module
        self._class_name = class_name

    def _resolve(self):
        return getattr(importlib.import_module(self._module), self._class_name)

    def __getattr__(self, attribute):
        return getattr(self._resolve(), attribute)

    def __call__(self, *args, **kwargs):
        return self._resolve()(*args, **kwargs)

    def __repr__(self):
        return f"<{self._module}.{self._class_name}, imported on first use>"


def add_entries():
    """Gives every registered kerasbert class an entry in Keras's table of
    custom objects (classes already registered keep theirs)."""
    import keras  # lazy: only called once Keras is imported

    table = keras.saving.get_custom_objects()
    for name, module in registered_classes().items():
        table.setdefault(name, _ClassOnFirstUse(module, name.split(">", 1)[1]))


class _ThenAddEntries(importlib.abc.Loader):
    """Keras's own loader, followed by `add_entries`."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        add_entries()

    def __getattr__(self, attribute):  # resources and the like: Keras's loader
        return getattr(self._loader, attribute)


class _WatchForKeras(importlib.abc.MetaPathFinder):
    """Waits for the first `import keras`, then steps aside."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "keras":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("keras")
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenAddEntries(spec.loader)
        return spec


def install():
    """Entries now if Keras is imported, else right after it is."""
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "saving"):
        add_entries()
    elif not any(isinstance(finder, _WatchForKeras) for finder in sys.meta_path):
        sys.meta_path.insert(0, _WatchForKeras())
