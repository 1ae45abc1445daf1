"""Small helpers shared across the package: atomic writes, lazy exports."""

import importlib
import json
import os
import tempfile


def atomic_write_text(path, text):
    """Writes `text` (UTF-8) to a temporary file in the same folder, then
    renames it over `path`: readers never see a half-written file, and a
    failure leaves any earlier file untouched."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def atomic_write_json(path, obj):
    """`atomic_write_text` of pretty, key-sorted, UTF-8 JSON."""
    text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False)
    atomic_write_text(path, text + "\n")


def lazy_exports(package, exports):
    """Module `__getattr__`/`__dir__` that import `{name: module}` on first
    use, so importing a package (e.g. by the CLI for `--help`) does not load
    TensorFlow."""

    def __getattr__(name):
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(exports)

    return __getattr__, __dir__
