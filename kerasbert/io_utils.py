"""Small helpers shared across the package: atomic writes, lazy exports."""

import contextlib
import importlib
import json
import os
import shutil
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


@contextlib.contextmanager
def atomic_directory(path, overwrite=False):
    """Builds a directory under a temporary name next to `path`, renamed to
    `path` only when the `with` body succeeds, so a failure (or a kill)
    never leaves a half-written `path`: the temporary directory is removed
    and any earlier `path` stays as it was.

    Yields the temporary directory's path. Raises FileExistsError when `path`
    exists and `overwrite` is false; with `overwrite`, the old directory is
    replaced only after the new one is complete.
    """
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} already exists (pass overwrite to replace it).")
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=parent)
    try:
        yield tmp
        if os.path.exists(path):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", suffix=".old", dir=parent)
            os.replace(path, os.path.join(old, "previous"))
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
