"""Artefacts that several test files need, built once per test session.

A tiny fine-tuned run, its SavedModel exports or a short pretraining run
take seconds to minutes to make; test files that each made their own were
most of the suite's time. `shared_build(root, name, build)` makes one
folder per name for the whole session: the first process that asks calls
`build(folder)`, every other one (another test file, another xdist worker)
waits for it and reuses the result.

The root is the session's pytest temporary folder (shared by the xdist
workers, new for every session), so a build never outlives the code that
made it. Users of a build must treat it as read-only: a test that changes
files copies the folder first (`private_copy`).
"""

import contextlib
import fcntl
import os
import shutil

_DONE = ".built"


def session_root(tmp_path_factory):
    """pathlib.Path shared by every worker of this pytest session.

    Under pytest-xdist each worker's base temporary folder is
    `SESSION/popen-gwN`; their common parent belongs to the session.
    """
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    root = base / "shared-builds"
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextlib.contextmanager
def _blocking_lock(path):
    """An exclusive `flock` on `path` for the `with` body; waits for the
    holder (the kernel drops it if the holder dies)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def shared_build(root, name, build):
    """pathlib.Path `root/name`, filled by `build(path)` exactly once.

    `build` writes into the final folder (runs record their own absolute
    paths, so building elsewhere and renaming would break them); a marker
    written after it returns tells later callers it is complete. A build
    that raised, or whose process died, leaves no marker: the next caller
    removes the folder and builds again, and sees the same error if the
    cause remains.
    """
    if not name or os.sep in name or name.startswith("."):
        raise ValueError(f"a shared build's name is one plain folder name, got {name!r}")
    target = root / name
    with _blocking_lock(root / f".{name}.lock"):
        if not (target / _DONE).exists():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            build(target)
            (target / _DONE).write_text("")
    return target


def private_copy(source, destination):
    """Copies a shared build (without its marker) to `destination`, for a
    test that changes, moves or deletes what it was given."""
    shutil.copytree(source, destination, ignore=shutil.ignore_patterns(_DONE))
    return destination
