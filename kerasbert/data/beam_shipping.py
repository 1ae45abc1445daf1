"""What a Beam pipeline hands to workers that start bare.

Workers of Dataflow, a Flink or Spark cluster or any portable runner are
other machines (or containers): they have neither this process's
kerasbert nor its files. The Beam writer (kerasbert.data.beam_writer)
therefore ships

  * kerasbert itself: `build_wheel` writes a wheel of the package this
    process runs (its own files and its installed metadata, so pip on the
    worker sees its dependencies), which the pipeline stages with
    `--extra_package`; the worker's boot installs it (Beam's SDK containers
    do; `beam/boot.sh` does for PROCESS environments);
  * the tokenizer, by value: `TokenizerFiles` holds its files' bytes, read
    once on the driver (from a local path or any Beam file system: gs://,
    s3://, hdfs://, ...). Small ones travel inside the pipeline (in the
    DoFn), larger ones are copied once into the run's temporary folder
    (which the workers write to anyway) and read back through Beam's file
    systems. A worker writes them into a temporary folder of its own and
    loads the tokenizer from there; no worker ever opens the driver's path.
"""

import base64
import contextlib
import hashlib
import importlib.metadata
import os
import re
import tempfile
import zipfile

from apache_beam.io.filesystems import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from kerasbert.errors import UsageError
from kerasbert.text.families import BPE_MERGES
from kerasbert.text.families import BPE_VOCABULARY
from kerasbert.text.families import BYTES
from kerasbert.text.tokenizer_paths import resolve_tokenizer_path
from kerasbert.text.tokenizer_paths import tokenizer_json_of
from kerasbert.text.hf_tokenizer_files import TOKENIZER_CONFIG
from kerasbert.version import __version__

#: The package folder this process imports kerasbert from.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Files of a tokenizer folder that travel (a Hugging Face or
#: google-research/bert folder: vocabularies, models, tokenizer configs; no
#: weights).
TOKENIZER_SUFFIXES = (".json", ".txt", ".model", ".spm")
#: Tokenizers up to this size travel inside the pipeline; larger ones
#: through the run's temporary folder (pipeline descriptions have size
#: limits: a job server's 4 MB gRPC messages, Dataflow's 10 MB job graph).
INLINE_BYTES = 1 << 20
_FOLDER = "tokenizer"  # the folder a file --vocab is written into
#: What makes Beam read a scheme.
SCHEME_PACKAGES = {"gs": "'kerasbert[dataflow]' (apache-beam[gcp])",
                   "s3": "'apache-beam[aws]'", "hdfs": "'apache-beam[hadoop]'"}


# ------------------------------------------------------------ the wheel


def _record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode("ascii")


def _package_files():
    """(archive name, absolute path) of every file of the package, sorted."""
    found = []
    for root, dirs, files in os.walk(PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in sorted(files):
            if name.startswith(".") or name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(root, name)
            found.append(("kerasbert/" + os.path.relpath(path, PACKAGE_DIR).replace(os.sep, "/"),
                          path))
    return found


def _metadata():
    """(METADATA, entry_points.txt or None) of the kerasbert that runs: its
    installed distribution's name, version, summary, extras and
    dependencies (an editable install's egg-info or a wheel's dist-info)
    when it is this version, else the minimum a wheel needs."""
    lines = ["Metadata-Version: 2.1", "Name: kerasbert", f"Version: {__version__}"]
    # An installed dist-info before a source folder's egg-info.
    found = sorted((d for d in importlib.metadata.distributions(name="kerasbert")
                    if d.version == __version__),
                   key=lambda d: d.read_text("METADATA") is None)
    if not found:
        return "\n".join(lines) + "\n", None
    dist = found[0]
    for field in ("Summary", "Requires-Python"):
        if dist.metadata.get(field):
            lines.append(f"{field}: {dist.metadata[field]}")
    requires = list(dist.requires or ())
    extras = list(dist.metadata.get_all("Provides-Extra") or ())
    for requirement in requires:
        for extra in re.findall(r"""extra\s*==\s*["']([^"']+)["']""", requirement):
            if extra not in extras:
                extras.append(extra)
    lines += [f"Provides-Extra: {extra}" for extra in extras]
    lines += [f"Requires-Dist: {requirement}" for requirement in requires]
    return "\n".join(lines) + "\n", dist.read_text("entry_points.txt")


def build_wheel(directory):
    """Writes a wheel of the kerasbert this process runs into `directory`
    (pure Python, py3-none-any; the same bytes for the same files) and
    returns its path. Works for editable and regular installs alike: it
    packs the package's files, never a source checkout's build."""
    metadata, entry_points = _metadata()
    info = f"kerasbert-{__version__}.dist-info"
    entries = []
    for name, path in _package_files():
        with open(path, "rb") as f:
            entries.append((name, f.read()))
    entries.append((f"{info}/METADATA", metadata.encode("utf-8")))
    if entry_points:
        entries.append((f"{info}/entry_points.txt", entry_points.encode("utf-8")))
    entries.append((f"{info}/WHEEL", (
        "Wheel-Version: 1.0\nGenerator: kerasbert.data.beam_shipping\n"
        "Root-Is-Purelib: true\nTag: py3-none-any\n").encode("utf-8")))
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in entries)
    entries.append((f"{info}/RECORD", (record + f"{info}/RECORD,,\n").encode("utf-8")))
    path = os.path.join(directory, f"kerasbert-{__version__}-py3-none-any.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in entries:
            member = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            member.external_attr = 0o644 << 16
            member.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(member, data)
    return path


# ------------------------------------------------------------ the tokenizer


def is_remote(path):
    return "://" in os.fspath(path)


def _read_remote(path):
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return f.read()


def _basename(path):
    return path.rstrip("/").rsplit("/", 1)[-1]


class TokenizerFiles:
    """A tokenizer's files by value.

    folder: the name of the folder they are written into (a --vocab folder's
        own name, which some layouts read: google-research/bert's casing);
    files: {name: bytes}, or None once `staged` into a Beam folder;
    entry: the name (in `folder`) that --vocab named, "" for the folder
        itself; the vocabulary "bytes" has no files and entry "bytes".
    """

    def __init__(self, folder, files, entry, staged=None, names=None):
        self.folder, self.files, self.entry = folder, files, entry
        self.staged = staged
        self.names = sorted(files) if names is None else list(names)

    @property
    def size(self):
        return sum(len(data) for data in (self.files or {}).values())

    @classmethod
    def read(cls, vocab):
        """Reads the files a --vocab value names: a local path or one on any
        Beam file system (gs://, s3://, hdfs://, ...). UsageError naming the
        path when there are none."""
        vocab = os.fspath(vocab)
        if vocab == BYTES:
            return cls("", {}, BYTES)
        if is_remote(vocab):
            return cls._read_remote_vocab(vocab)
        resolve_tokenizer_path(vocab)  # UsageError naming a missing file
        if os.path.isdir(vocab):
            names = [n for n in sorted(os.listdir(vocab)) if n.endswith(TOKENIZER_SUFFIXES)
                     and os.path.isfile(os.path.join(vocab, n))]
            files = {}
            for name in names:
                with open(os.path.join(vocab, name), "rb") as f:
                    files[name] = f.read()
            return cls(os.path.basename(os.path.normpath(vocab)), files, "")
        _, paths = resolve_tokenizer_path(vocab)
        if tokenizer_json_of(vocab):  # the file itself (the workers rebuild from it)
            config = os.path.join(os.path.dirname(vocab), TOKENIZER_CONFIG)
            paths = [vocab] + ([config] if os.path.isfile(config) else [])
        files = {}
        for path in paths:
            with open(path, "rb") as f:
                files[os.path.basename(path)] = f.read()
        return cls(_FOLDER, files, os.path.basename(vocab))

    @classmethod
    def _read_remote_vocab(cls, vocab):
        try:
            FileSystems.get_filesystem(vocab)
        except ValueError:
            scheme = vocab.split("://", 1)[0]
            extra = SCHEME_PACKAGES.get(scheme, "the package of a Beam file system for it")
            raise UsageError(f"--vocab {vocab}: no Beam file system for {scheme}:// is "
                             f"installed here (pip install {extra}).") from None
        try:
            found = [m.path for m in FileSystems.match([vocab])[0].metadata_list]
            if found == [vocab]:  # a file
                name = _basename(vocab)
                paths = [vocab]
                if name == BPE_VOCABULARY:
                    paths.append(FileSystems.join(vocab.rsplit("/", 1)[0], BPE_MERGES))
                files = {_basename(p): _read_remote(p) for p in paths}
                return cls(_FOLDER, files, name)
            folder = vocab.rstrip("/")
            found = sorted(m.path for m in FileSystems.match([folder + "/*"])[0].metadata_list)
            files = {_basename(p): _read_remote(p) for p in found
                     if "/" not in p[len(folder) + 1:] and p.endswith(TOKENIZER_SUFFIXES)}
        except Exception as err:  # BeamIOError: no such file or bucket, no credentials
            raise UsageError(f"--vocab {vocab}: cannot read it: {err}") from None
        if not files:
            raise UsageError(f"--vocab {vocab}: Vocabulary file not found (no tokenizer "
                             f"files {'/'.join(TOKENIZER_SUFFIXES)} there).")
        return cls(_basename(folder), files, "")

    def stage(self, folder):
        """A copy whose files are written once under `folder` (a Beam path)
        and read from there by the workers, instead of inside the pipeline."""
        for name, data in self.files.items():
            with FileSystems.create(f"{folder}/{name}",
                                    compression_type=CompressionTypes.UNCOMPRESSED) as f:
                f.write(data)
        return TokenizerFiles(self.folder, None, self.entry, staged=folder, names=self.names)

    def write(self, directory):
        """Writes the files into `directory`/folder; returns the path to give
        the tokenizer loaders (what --vocab named, there)."""
        if self.entry == BYTES:
            return BYTES
        target = os.path.join(directory, self.folder)
        os.makedirs(target, exist_ok=True)
        for name in self.names:
            data = (self.files[name] if self.files is not None
                    else _read_remote(f"{self.staged}/{name}"))
            with open(os.path.join(target, name), "wb") as f:
                f.write(data)
        return os.path.join(target, self.entry) if self.entry else target


@contextlib.contextmanager
def driver_copy(vocab):
    """The driver's own copy of --vocab (local or on a Beam file system),
    read once: yields its local path, removed afterwards. The driver reads
    the tokenizer's specials, fingerprint and files from it."""
    tokenizer = TokenizerFiles.read(vocab)
    if tokenizer.entry == BYTES:
        yield BYTES
        return
    with tempfile.TemporaryDirectory(prefix="kerasbert-vocab-") as directory:
        path = tokenizer.write(directory)
        if not tokenizer.entry:
            source = vocab.rstrip("/")
        elif is_remote(vocab):
            source = vocab.rsplit("/", 1)[0]
        else:
            source = os.path.dirname(os.path.abspath(vocab))
        try:
            yield path
        except UsageError as err:  # about the copy's files: name the user's
            message = str(err).replace(path, vocab)
            raise UsageError(message.replace(os.path.join(directory, tokenizer.folder),
                                             source)) from None
