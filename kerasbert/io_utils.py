"""Small helpers shared across the package: atomic writes with the
permissions of ordinary files, exclusive locks on output locations, cleanup
of what a killed writer left, lazy exports.

Every temporary a writer makes is hidden and named `.NAME.tmp-<random>[SUFFIX]`
beside its final name NAME (`.NAME.old-<random>` for a folder being replaced),
so readers, which skip hidden names, never read one, and the next writer
into the same place (holding its lock) can recognise and remove them.
"""

import contextlib
import datetime
import fcntl
import hashlib
import importlib
import json
import os
import re
import shutil
import socket
import sys
import tempfile

from kerasbert.errors import UsageError

# --- permissions ------------------------------------------------------------


def _umask():
    """The process umask, read without changing it where Linux allows."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def make_shareable(path):
    """Gives a file made by `tempfile` (0600) or a folder (0700) the mode an
    ordinary `open`/`mkdir` would have (0644 / 0755 under the usual umask),
    so a model server running as another user can read what we wrote."""
    mode = 0o777 if os.path.isdir(path) else 0o666
    os.chmod(path, mode & ~_umask())


def make_tree_shareable(root):
    """`make_shareable` on a folder and everything under it."""
    make_shareable(root)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                make_shareable(path)


# --- temporaries --------------------------------------------------------------

_TEMPORARY = re.compile(r"^\..+\.(tmp|old)-[^/]*$|^\..+\.tmp$")


def temporary_file(path, suffix=""):
    """(fd, name) of a new hidden temporary beside `path`, for writing
    before `os.replace(name, path)`. `suffix` keeps an extension a writer
    needs (Keras saves only to names ending in `.keras`)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    return tempfile.mkstemp(prefix=f".{os.path.basename(path)}.tmp-", suffix=suffix,
                            dir=directory)


def is_temporary(name):
    """True for the hidden names our writers use while writing."""
    return bool(_TEMPORARY.match(name))


def remove_temporaries(directory, name=None):
    """Removes what killed writers left in `directory`: every hidden
    temporary, or only those of the final name `name`. Call it while holding
    the lock on that place, so no live writer's temporary is removed.
    Returns the removed names."""
    if not os.path.isdir(directory):
        return []
    removed = []
    for entry in sorted(os.listdir(directory)):
        if not is_temporary(entry):
            continue
        if name is not None and not entry.startswith(f".{name}."):
            continue
        path = os.path.join(directory, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        removed.append(entry)
    return removed


# --- atomic writes ------------------------------------------------------------


def atomic_write_text(path, text):
    """Writes `text` (UTF-8) to a temporary file in the same folder, then
    renames it over `path`: readers never see a half-written file, and a
    failure leaves any earlier file untouched."""
    with atomic_file(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)


def json_or_none(path):
    """The JSON in `path`, or None when the file is missing or not JSON
    (for probing what a directory holds)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def file_sha256(path):
    """The sha256 hex digest of a file's bytes, read in 4 MiB blocks (weight
    files and checkpoint shards are never held whole in memory)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def atomic_write_json(path, obj):
    """`atomic_write_text` of pretty, key-sorted, UTF-8 JSON."""
    text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False)
    atomic_write_text(path, text + "\n")


@contextlib.contextmanager
def atomic_file(path, suffix=""):
    """Yields a temporary name beside `path` for a writer that wants a file
    name (`model.save`, `fig.savefig`); on success it gets an ordinary
    file's mode and replaces `path`; on failure it is removed."""
    fd, tmp = temporary_file(path, suffix)
    os.close(fd)
    try:
        yield tmp
        make_shareable(tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


def lazy_exports(package, modules):
    """A package's public names, imported on first use, so importing the
    package (e.g. by the CLI for `--help`) does not load TensorFlow.

    Args:
        package: the package's `__name__`.
        modules: {submodule name relative to the package: (public name, ...)}.

    Returns:
        (`__getattr__`, `__dir__`, `__all__`) for the package's namespace.
    """
    exports = {name: f"{package}.{module}" for module, names in modules.items()
               for name in names}

    def __getattr__(name):
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(exports)

    return __getattr__, __dir__, sorted(exports)


@contextlib.contextmanager
def atomic_directory(path, overwrite=False):
    """Builds a directory under a temporary name next to `path`, renamed to
    `path` only when the `with` body succeeds, so a failure (or a kill)
    never leaves a half-written `path`: the temporary directory is removed
    and any earlier `path` stays as it was.

    Yields the temporary directory's path. Raises FileExistsError when `path`
    exists and `overwrite` is false; with `overwrite`, the old directory is
    replaced only after the new one is complete. The finished tree gets
    ordinary permissions (folders 0755, files 0644 under the usual umask).
    """
    path = os.path.abspath(os.fspath(path))
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{path} already exists (pass overwrite to replace it).")
    parent, name = os.path.split(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=parent)
    try:
        yield tmp
        make_tree_shareable(tmp)
        if os.path.exists(path):
            old = tempfile.mkdtemp(prefix=f".{name}.old-", dir=parent)
            os.replace(path, os.path.join(old, "previous"))
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


# --- locks ----------------------------------------------------------------------


class OutputLocked(UsageError):
    """Another process holds the lock on an output location."""


def lock_path(path):
    """The lock file of an output location: `.NAME.lock` beside it (beside,
    not inside, so it works before the location exists and across the
    rename that publishes a folder)."""
    parent, name = os.path.split(os.path.abspath(os.fspath(path)))
    return os.path.join(parent, f".{name}.lock")


def check_output_kind(path, kind, flag=None):
    """Raises UsageError when `path` exists but is not a `kind` ("folder"
    or "file"): writing would fail late, or replace the wrong thing."""
    name = f"{flag} {path}" if flag else str(path)
    if kind == "folder" and os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{name} exists and is a file, not a folder.")
    if kind == "file" and os.path.isdir(path):
        raise UsageError(f"{name} is a folder; give a file name.")


@contextlib.contextmanager
def output_lock(path, kind=None, flag=None, what=None):
    """Holds an exclusive lock on the output location `path` (a file or a
    folder, present or not) for the `with` body. With `kind` ("folder" or
    "file"), first refuses a `path` of the other kind (`flag` names the
    option in the message).

    The lock is an `flock` on `.NAME.lock` beside `path`: the kernel
    releases it when the process ends in any way (a crash or SIGKILL
    included), so a stale lock file never blocks anyone. A second writer
    fails at once with OutputLocked naming the holder (pid, host, command,
    start time). Under the lock, the temporaries a killed writer left for
    `path` are removed.
    """
    if kind is not None:
        check_output_kind(path, kind, flag)
    lock = lock_path(path)
    os.makedirs(os.path.dirname(lock), exist_ok=True)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise OutputLocked(
                f"{path} is being written by another process ({holder}); wait for it to "
                f"finish or choose another output (lock: {lock}).") from None
        # The file may have been unlinked by the previous holder between our
        # open and our flock: then we locked an orphan; start over.
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        command = what or " ".join(["kerasbert"] + sys.argv[1:2])
        started = datetime.datetime.now().isoformat(timespec="seconds")
        os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}, {command}, since {started}\n"
                 .encode("utf-8", "replace"))
        parent, name = os.path.split(os.path.abspath(os.fspath(path)))
        remove_temporaries(parent, name)
        if os.path.isdir(path):
            remove_temporaries(path)
        yield lock
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)
        os.close(fd)


def _read_holder(fd):
    try:
        text = os.pread(fd, 512, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return text or "a process that is starting"


def cache_dir(*parts):
    """kerasbert's cache folder joined with `parts`: $KERASBERT_CACHE, else
    $XDG_CACHE_HOME/kerasbert, else ~/.cache/kerasbert."""
    root = os.environ.get("KERASBERT_CACHE")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "kerasbert")
    return os.path.join(root, *parts)
