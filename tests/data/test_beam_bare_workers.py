"""Beam workers that start bare get what the pipeline ships, and nothing else.

* Beam's portable runner (its Python job service, `--job_endpoint=embed`)
  runs the pipeline on SDK workers of a PROCESS environment whose command is
  beam/boot.sh: each worker makes a fresh virtual environment that sees the
  pinned third-party stack but not kerasbert, fetches the job's staged
  artifacts from the artifact endpoint, installs them and starts Beam's SDK
  worker. kerasbert reaches it only as the staged wheel; the tokenizer only by
  value (the driver's vocabulary file is deleted once the pipeline is built).
  The records equal the local writer's.
* A Beam FileSystem for a made-up scheme (mem://, a dict) holds the inputs,
  the vocabulary and the output: nothing opens them with open().
* Misconfigured runner options exit 2 with one line (the console script).
"""

import hashlib
import io
import json
import os
import subprocess
import sys
import sysconfig
import zipfile

import pytest
from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystem import CompressedFile
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystem import FileMetadata
from apache_beam.io.filesystem import FileSystem
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners.portability.fn_api_runner import worker_handlers

from kerasbert import cli
from kerasbert.data import beam_options
from kerasbert.data import beam_shipping
from kerasbert.data import beam_writer
from kerasbert.data import writer

sys.path.insert(0, os.path.dirname(__file__))
from pretrain_fixtures import write_corpus  # noqa: E402
from pretrain_fixtures import write_vocab  # noqa: E402
from test_beam_writer import records  # noqa: E402 (the records of a shard folder)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BOOT = os.path.join(REPO, "beam", "boot.sh")
SMALL = dict(sequence_length=32, max_predictions_per_seq=5, dupe_factor=2, progress=False)
KERASBERT = os.path.join(os.path.dirname(sys.executable), "kerasbert")


# ------------------------------------------------------------ PROCESS workers


class ProcessWorkerHandler(worker_handlers.GrpcWorkerHandler):
    """A PROCESS environment for Beam's Python job service, which runs
    DOCKER, EXTERNAL and in-process workers only: starts the environment's
    command with the flags of Beam's worker contract and its env, as Flink's
    and Spark's job servers do for PROCESS."""

    root = None  # the workers' folders
    started = []

    def __init__(self, payload, state, provision_info, grpc_server):
        super().__init__(state, provision_info, grpc_server)
        self.payload = payload
        self.process = None

    def start_worker(self):
        folder = os.path.join(self.root, self.worker_id)
        os.makedirs(folder)
        command = [
            self.payload.command,
            f"--id={self.worker_id}",
            f"--provision_endpoint={self.control_address}",
            f"--artifact_endpoint={self.control_address}",
            f"--control_endpoint={self.control_address}",
            f"--logging_endpoint={self.logging_api_service_descriptor().url}",
            f"--semi_persist_dir={folder}",
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env.update(self.payload.env)
        log = open(os.path.join(self.root, f"{self.worker_id}.log"), "wb")
        self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                        cwd=self.root)
        log.close()
        self.started.append(folder)

    def stop_worker(self):
        if self.process is not None:
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _worker_logs(root):
    return "\n".join(open(os.path.join(root, n), errors="replace").read()[-3000:]
                     for n in sorted(os.listdir(root)) if n.endswith(".log"))


def test_portable_runner_with_bare_process_workers(tmp_path, monkeypatch):
    """`--runner portable -- --job_endpoint=embed --environment_type=PROCESS
    --environment_config={"command": "beam/boot.sh", ...}`."""
    driver = tmp_path / "driver"
    driver.mkdir()
    files = [write_corpus(str(driver / f"part{i}.txt"), n, seed=i) for i, n in enumerate((70, 90))]
    vocab = write_vocab(str(driver))
    local = writer.create_pretraining_data(files, vocab, str(tmp_path / "local"), num_shards=2,
                                           **SMALL)

    # The stack the workers see: this environment's site-packages, in which
    # kerasbert is an editable install; the boot leaves it out.
    site = sysconfig.get_paths()["purelib"]
    assert any(n.startswith("__editable__") and "kerasbert" in n for n in os.listdir(site)) \
        or os.path.isdir(os.path.join(site, "kerasbert"))
    root = tmp_path / "workers"
    root.mkdir()
    monkeypatch.setattr(ProcessWorkerHandler, "root", str(root))
    monkeypatch.setattr(ProcessWorkerHandler, "started", [])
    monkeypatch.setitem(worker_handlers.WorkerHandler._registered_environments,
                        common_urns.environments.PROCESS.urn,
                        (ProcessWorkerHandler, beam_runner_api_pb2.ProcessPayload))

    # Once the pipeline is built, the driver's vocabulary is gone: a worker
    # that opened config["vocab_file"] would fail.
    built, build = [], beam_writer.build_pipeline

    def build_then_delete_vocab(*args, **kwargs):
        build(*args, **kwargs)
        os.remove(vocab)
        built.append(True)

    monkeypatch.setattr(beam_writer, "build_pipeline", build_then_delete_vocab)
    monkeypatch.chdir(tmp_path)  # not the repository
    config = {"command": BOOT, "env": {
        "KERASBERT_BOOT_PYTHON": sys.executable,
        "KERASBERT_BOOT_SITE": site,
        "KERASBERT_BOOT_PIP_ARGS": "--no-index",  # offline: the stack has the dependencies
    }}
    out = tmp_path / "portable"
    try:
        meta = writer.create_pretraining_data(
            files, vocab, str(out), num_shards=3, runner="portable",
            pipeline_args=["--job_endpoint=embed", "--environment_type=PROCESS",
                           f"--environment_config={json.dumps(config)}"], **SMALL)
    except Exception:
        print(_worker_logs(root))
        raise
    assert built and not os.path.exists(vocab)
    theirs, written = records(out)
    ours, _ = records(tmp_path / "local")
    assert sum(ours.values()) > 50
    assert ours == theirs
    assert meta["num_instances"] == local["num_instances"]
    assert meta["vocab_sha256"] == local["vocab_sha256"]
    assert written["options"]["runner"] == "portable"

    # Every worker booted bare and got kerasbert from the staged wheel.
    assert ProcessWorkerHandler.started, _worker_logs(root)
    for folder in ProcessWorkerHandler.started:
        with open(os.path.join(folder, "boot.json")) as f:
            report = json.load(f)
        assert report["python"].startswith(folder)
        assert report["kerasbert_before"] == "", report  # not importable before the install
        wheel = "kerasbert-0.1.0-py3-none-any.whl"
        assert wheel in report["staged"] and "extra_packages.txt" in report["staged"]
        assert report["installed"] == [wheel]
        assert report["kerasbert_after"].startswith(os.path.join(folder, "venv")), report


# ------------------------------------------------------------ mem:// file system


class MemFileSystem(FileSystem):
    """A Beam file system for mem://, backed by a dict (prefixes, no
    folders, like object stores)."""

    FILES = {}

    @classmethod
    def scheme(cls):
        return "mem"

    def join(self, basepath, *paths):
        return "/".join([basepath.rstrip("/"), *(p.strip("/") for p in paths)])

    def split(self, path):
        head, _, tail = path.rpartition("/")
        return head, tail

    def mkdirs(self, path):
        pass

    def has_dirs(self):
        return False

    def _list(self, dir_or_prefix):
        for path, data in sorted(self.FILES.items()):
            if path.startswith(dir_or_prefix):
                yield FileMetadata(path, len(data), 0.0)

    def create(self, path, mime_type="application/octet-stream",
               compression_type=CompressionTypes.AUTO):
        files = self.FILES

        class Writer(io.BytesIO):
            def close(self):
                if not self.closed:
                    files[path] = self.getvalue()
                super().close()

        return self._compressed(Writer(), path, compression_type)

    def open(self, path, mime_type="application/octet-stream",
             compression_type=CompressionTypes.AUTO):
        if path not in self.FILES:
            raise BeamIOError("no such file", {path: FileNotFoundError(path)})
        return self._compressed(io.BytesIO(self.FILES[path]), path, compression_type)

    def _compressed(self, raw, path, compression_type):
        kind = FileSystem._get_compression_type(path, compression_type)
        return raw if kind == CompressionTypes.UNCOMPRESSED else CompressedFile(raw, kind)

    def copy(self, source_file_names, destination_file_names):
        for source, destination in zip(source_file_names, destination_file_names):
            self.FILES[destination] = self.FILES[source]

    def rename(self, source_file_names, destination_file_names):
        for source, destination in zip(source_file_names, destination_file_names):
            self.FILES[destination] = self.FILES.pop(source)

    def exists(self, path):
        return path in self.FILES

    def size(self, path):
        return len(self.FILES[path])

    def last_updated(self, path):
        return 0.0

    def checksum(self, path):
        return hashlib.md5(self.FILES[path]).hexdigest()

    def metadata(self, path):
        return FileMetadata(path, len(self.FILES[path]), 0.0)

    def delete(self, paths):
        for path in paths:
            gone = [p for p in self.FILES if p == path or p.startswith(path.rstrip("/") + "/")]
            if not gone:
                raise BeamIOError("no such file", {path: FileNotFoundError(path)})
            for p in gone:
                del self.FILES[p]


def _put(path, local_file):
    with open(local_file, "rb") as f:
        MemFileSystem.FILES[path] = f.read()


def _fetch(prefix, folder):
    os.makedirs(folder)
    for path, data in MemFileSystem.FILES.items():
        if path.startswith(prefix + "/") and "/" not in path[len(prefix) + 1:]:
            with open(os.path.join(folder, path.rsplit("/", 1)[1]), "wb") as f:
                f.write(data)
    return folder


def test_inputs_vocab_and_output_on_a_beam_file_system(tmp_path, monkeypatch, capsys):
    from kerasbert.text.bpe_training import train_bpe

    monkeypatch.setattr(MemFileSystem, "FILES", {})
    files = [write_corpus(str(tmp_path / f"part{i}.txt"), n, seed=i)
             for i, n in enumerate((60, 80))]
    vocab = write_vocab(str(tmp_path))
    bpe = str(tmp_path / "roberta")
    train_bpe(files[:1], 300, bpe)
    for i, name in enumerate(files):
        _put(f"mem://corpus/part{i}.txt", name)
    _put("mem://tokenizers/vocab.txt", vocab)
    for name in os.listdir(bpe):
        _put(f"mem://tokenizers/roberta/{name}", os.path.join(bpe, name))

    # WordPiece through the command line; the tokenizer staged through the
    # run's temporary folder (as a large one is) instead of inside the DoFn.
    monkeypatch.setattr(beam_shipping, "INLINE_BYTES", 0)
    staged = []
    real_stage = beam_shipping.TokenizerFiles.stage
    monkeypatch.setattr(beam_shipping.TokenizerFiles, "stage",
                        lambda self, folder: staged.append(folder) or real_stage(self, folder))
    code = cli.main(["create-pretraining-data", "--input", "mem://corpus/part*.txt",
                     "--vocab", "mem://tokenizers/vocab.txt", "--output-dir", "mem://data/wp",
                     "--max-seq-length", "32", "--max-predictions-per-seq", "5",
                     "--dupe-factor", "2", "--num-shards", "2", "--runner", "direct",
                     "--no-progress"])
    assert code == 0, capsys.readouterr().err
    assert staged and staged[0].startswith("mem://data/wp/.beam.tmp-")
    assert sorted(p for p in MemFileSystem.FILES if p.startswith("mem://data/wp/")) == [
        "mem://data/wp/metadata.json", "mem://data/wp/part-00000-of-00002.tfrecord",
        "mem://data/wp/part-00001-of-00002.tfrecord"]  # no temporary folder left
    writer.create_pretraining_data(files, vocab, str(tmp_path / "local_wp"), **SMALL)
    assert records(_fetch("mem://data/wp", str(tmp_path / "mem_wp")))[0] == \
        records(tmp_path / "local_wp")[0]

    # A byte-level BPE folder (vocab.json + merges.txt), by value in the DoFn.
    monkeypatch.setattr(beam_shipping, "INLINE_BYTES", 1 << 20)
    staged.clear()
    writer.create_pretraining_data(["mem://corpus/part1.txt"], "mem://tokenizers/roberta",
                                   "mem://data/bpe", objective="none", runner="direct", **SMALL)
    assert not staged
    writer.create_pretraining_data(files[1:], bpe, str(tmp_path / "local_bpe"),
                                   objective="none", **SMALL)
    theirs, meta = records(_fetch("mem://data/bpe", str(tmp_path / "mem_bpe")))
    assert theirs == records(tmp_path / "local_bpe")[0] and meta["tokenizer"] == "bpe"

    # A vocabulary that is not there, or on a scheme no file system reads.
    for bad, message in (("mem://tokenizers/none.txt", "Vocabulary file not found"),
                         ("nofs://x/vocab.txt", "no Beam file system for nofs://")):
        code = cli.main(["create-pretraining-data", "--input", "mem://corpus/part0.txt",
                         "--vocab", bad, "--output-dir", "mem://data/x", "--runner", "direct",
                         "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and message in err, err
    assert not any(p.startswith("mem://data/x") for p in MemFileSystem.FILES)


# ------------------------------------------------------------ the wheel


def test_the_staged_wheel_is_this_kerasbert(tmp_path):
    path = beam_shipping.build_wheel(str(tmp_path))
    assert os.path.basename(path) == "kerasbert-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(path) as wheel:
        names = wheel.namelist()
        metadata = wheel.read("kerasbert-0.1.0.dist-info/METADATA").decode()
        record = wheel.read("kerasbert-0.1.0.dist-info/RECORD").decode()
        source = wheel.read("kerasbert/data/beam_writer.py")
    assert "kerasbert/__init__.py" in names and not any("__pycache__" in n for n in names)
    assert "Requires-Dist: tensorflow" in metadata  # pip on a worker sees the dependencies
    assert all(f"{n}," in record for n in names)
    with open(beam_writer.__file__, "rb") as f:
        assert source == f.read()
    # The same bytes for the same files (a staging location caches it).
    (tmp_path / "again").mkdir()
    again = beam_shipping.build_wheel(str(tmp_path / "again"))
    with open(path, "rb") as a, open(again, "rb") as b:
        assert a.read() == b.read()


# ------------------------------------------------------------ misconfiguration


@pytest.mark.parametrize("runner_args, message", [
    (["--runner", "flink"], "--flink_master=... or --job_endpoint=..."),
    (["--runner", "portable", "--", "--job_endpoint=localhost:8099",
      "--environment_type=PODMAN"], "--environment_type=PODMAN: expected one of DOCKER"),
    (["--runner", "spark", "--", "--job_endpoint=localhost:8099",
      "--environment_type=PROCESS"], "needs the worker's boot command"),
    (["--runner", "portable", "--", "--job_endpoint=embed", "--environment_type=PROCESS",
      '--environment_config={"command": "boot.sh"}', "--environment_option=process_command=x"],
     "pipeline options: Option environment_config is incompatible"),
    (["--runner", "dataflow", "--", "--project=p", "--region=r",
      "--temp_location=gs://b/tmp"], "pip install 'kerasbert[dataflow]'"),
])
def test_misconfigured_runner_exits_2_with_one_line(tmp_path, runner_args, message):
    if "dataflow" in runner_args and beam_options.installed("google.cloud.storage"):
        pytest.skip("apache-beam[gcp] is installed here")
    vocab = write_vocab(str(tmp_path))
    corpus = write_corpus(str(tmp_path / "c.txt"), 5)
    out = tmp_path / "out"
    done = subprocess.run(
        [KERASBERT, "create-pretraining-data", "--input", corpus, "--vocab", vocab,
         "--output-dir", str(out), "--no-progress", *runner_args],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert not out.exists() or not os.listdir(out)
