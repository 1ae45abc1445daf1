"""Writers of output folders: exclusive locks, no silent replacement,
permissions a model server can read, and no litter from killed writers.

Lock conflicts are tested with the lock held by this process through the
library while the command runs in-process (an `flock` conflicts between two
opens of the file, in one process as in two) and, once, between two console
script processes."""

import json
import os
import stat
import sys

import pytest

from kerasbert import io_utils
from kerasbert.cli import main
from reliability.console import kerasbert, ok, one_line_error, start

# Tiny fine-tuning directories of every task type (tests/serving).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "serving"))
from serving_fixtures import make_finetuned_dir  # noqa: E402
from slow_marks import slow_covered_by  # noqa: E402


# --- the lock itself -------------------------------------------------------------


def test_second_lock_fails_naming_the_holder(tmp_path):
    target = tmp_path / "out"
    with io_utils.output_lock(target, what="kerasbert pretrain"):
        assert os.path.exists(io_utils.lock_path(target))
        with pytest.raises(io_utils.OutputLocked, match=f"pid {os.getpid()} .*kerasbert pretrain"):
            with io_utils.output_lock(target):
                pass
    # Released and removed on exit; the next writer gets it.
    assert not os.path.exists(io_utils.lock_path(target))
    with io_utils.output_lock(target):
        pass


def test_lock_is_released_when_the_body_fails(tmp_path):
    with pytest.raises(RuntimeError):
        with io_utils.output_lock(tmp_path / "out"):
            raise RuntimeError("boom")
    with io_utils.output_lock(tmp_path / "out"):
        pass


def test_a_stale_lock_file_of_a_dead_process_does_not_block(tmp_path):
    # What a SIGKILLed writer leaves: the file, but no flock on it.
    lock = io_utils.lock_path(tmp_path / "out")
    with open(lock, "w") as f:
        f.write("pid 999999 on elsewhere, kerasbert export, since long ago\n")
    with io_utils.output_lock(tmp_path / "out") as held:
        assert held == lock
        with open(lock) as f:  # the new holder replaced the dead one's line
            assert f.read().startswith(f"pid {os.getpid()} ")
    assert not os.path.exists(lock)


def test_lock_refuses_an_output_of_the_wrong_kind(tmp_path):
    a_file = tmp_path / "taken"
    a_file.write_text("not a folder")
    with pytest.raises(io_utils.UsageError, match="--output-dir .*taken exists and is a file"):
        with io_utils.output_lock(a_file, kind="folder", flag="--output-dir"):
            pass
    with pytest.raises(io_utils.UsageError, match="is a folder; give a file name"):
        with io_utils.output_lock(tmp_path, kind="file", flag="--output"):
            pass
    assert a_file.read_text() == "not a folder"


def test_temporaries_of_killed_writers_are_removed_under_the_lock(tmp_path):
    out = tmp_path / "export"
    out.mkdir()
    (out / "1").mkdir()
    leftovers = [out / ".2.tmp-k3j2", tmp_path / ".export.tmp-a1b2", tmp_path / ".export.old-9z"]
    for path in leftovers:
        path.mkdir()
        (path / "saved_model.pb").write_bytes(b"half")
    (out / ".model.keras.tmp-x1.keras").write_bytes(b"half")
    keep = [tmp_path / ".other.tmp-1", out / ".hidden_but_ours"]  # another target / not a temporary
    for path in keep:
        path.write_text("keep")
    with io_utils.output_lock(out):
        pass
    assert not any(path.exists() for path in leftovers)
    assert not (out / ".model.keras.tmp-x1.keras").exists()
    assert all(path.exists() for path in keep) and (out / "1").is_dir()


# --- permissions -----------------------------------------------------------------


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_atomic_writes_have_ordinary_permissions(tmp_path):
    umask = io_utils._umask()
    io_utils.atomic_write_json(tmp_path / "config.json", {"a": 1})
    assert _mode(tmp_path / "config.json") == 0o666 & ~umask
    with io_utils.atomic_directory(tmp_path / "version") as tmp:
        os.makedirs(os.path.join(tmp, "variables"))
        with open(os.path.join(tmp, "variables", "data"), "w") as f:
            f.write("x")
    assert _mode(tmp_path / "version") == 0o777 & ~umask
    assert _mode(tmp_path / "version" / "variables") == 0o777 & ~umask
    assert _mode(tmp_path / "version" / "variables" / "data") == 0o666 & ~umask


# --- commands --------------------------------------------------------------------


def _held(path, command):
    return io_utils.output_lock(path, what=command)


@pytest.mark.parametrize("argv, target", [
    (["create-pretraining-data", "--input", "corpus.txt", "--vocab", "vocab.txt",
      "--output-dir", "{out}"], "{out}"),
    (["export", "--model", "{tmp}", "--output", "{out}"], "{out}"),
    (["finetune", "--task", "csv:train.csv", "--preset", "bert_tiny", "--vocab", "vocab.txt",
      "--output-dir", "{out}"], "{out}"),
    (["create-finetuning-data", "--task", "csv:train.csv", "--vocab", "vocab.txt",
      "--output-dir", "{out}"], "{out}"),
])
def test_a_second_writer_exits_2_naming_the_holder(tmp_path, capsys, monkeypatch, argv, target):
    # The relative inputs must resolve here, whatever the suite's directory:
    # the lock, not a missing file, is what this test is about.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "corpus.txt").write_text("A cat .\nA dog .\n\nThe end .\n")
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\ncat\n")
    (tmp_path / "train.csv").write_text("sentence,label\na cat,x\n")
    names = {"out": str(tmp_path / "out"), "tmp": str(tmp_path)}
    argv = [a.format(**names) for a in argv]
    with _held(target.format(**names), "kerasbert other-writer"):
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "being written by another process" in err, err
    assert f"pid {os.getpid()}" in err and "kerasbert other-writer" in err, err
    assert not (tmp_path / "out").exists()


def test_finetune_refuses_to_replace_a_model_without_overwrite(tmp_path, capsys):
    out = tmp_path / "ft"
    out.mkdir()
    (out / "model.keras").write_bytes(b"a finished model")
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n")
    argv = ["finetune", "--task", "csv:train.csv", "--preset", "bert_tiny",
            "--vocab", str(tmp_path / "vocab.txt"), "--output-dir", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "already holds a fine-tuned model" in err and "--overwrite" in err, err
    assert (out / "model.keras").read_bytes() == b"a finished model"


@pytest.mark.parametrize("argv, flag", [
    (["vocab", "--input", "corpus.txt", "--vocab-size", "50", "--output", "{dir}"], "--output"),
    (["create-pretraining-data", "--input", "corpus.txt", "--vocab", "vocab.txt",
      "--output-dir", "{file}"], "--output-dir"),
    (["export", "--model", "{dir}", "--output", "{file}"], "--output"),
    (["pretrain", "--preset", "bert_tiny", "--vocab", "vocab.txt", "--data", "corpus.txt",
      "--output-dir", "{file}", "--steps", "1"], "--output-dir"),
])
def test_an_output_of_the_wrong_kind_is_one_line_exit_2(tmp_path, capsys, monkeypatch, argv,
                                                       flag):
    (tmp_path / "corpus.txt").write_text("A cat .\nA dog .\n\nThe end .\n")
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\ncat\n")
    a_file, a_dir = tmp_path / "a_file", tmp_path / "a_dir"
    a_file.write_text("precious")
    a_dir.mkdir()
    monkeypatch.chdir(tmp_path)
    argv = [a.format(file=a_file, dir=a_dir) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "Traceback" not in err, err
    assert flag in err, err
    assert a_file.read_text() == "precious" and not os.listdir(a_dir)


# 26 s: three console exports, two at once, into one OUTPUT; the default suite checks
# the lock against a second writer of each command, a console export refused over an
# existing version, and the export's permissions and export.json in process.
@slow_covered_by("tests/reliability/test_writers.py::test_a_second_writer_exits_2_naming_the_holder",
                 "tests/reliability/test_writers.py::test_export_refuses_an_existing_version_without_overwrite",
                 "tests/reliability/test_writers.py::test_atomic_writes_have_ordinary_permissions",
                 "tests/training/test_finetune_cli.py::test_a_run_made_from_relative_paths_travels")
def test_two_export_processes_never_share_a_version(tmp_path):
    """Two `kerasbert export` processes into one OUTPUT at once, without
    --version: each either writes its own version or is refused by the lock;
    no version is replaced and nothing half-written is left."""
    ft = make_finetuned_dir(str(tmp_path / "ft"), "classification", sequence_length=16)
    out = tmp_path / "export"
    ok(kerasbert("export", "--model", ft, "--output", out, cwd=tmp_path))
    first = (out / "1" / "saved_model.pb").read_bytes()
    processes = [start("export", "--model", ft, "--output", out, cwd=tmp_path) for _ in range(2)]
    results = [(p.wait(timeout=600), p.stderr.read()) for p in processes]
    codes = sorted(code for code, _ in results)
    assert codes in ([0, 0], [0, 2]), results
    for code, err in results:
        if code == 2:
            assert "being written by another process" in err and "Traceback" not in err, err
    versions = sorted(int(n) for n in os.listdir(out) if n.isdigit())
    assert versions == list(range(1, 2 + codes.count(0)))
    assert (out / "1" / "saved_model.pb").read_bytes() == first
    assert [n for n in os.listdir(out) if n.startswith(".")] == []
    for version in versions:
        info = json.loads((out / str(version) / "assets.extra" / "export.json").read_text())
        assert info["source"]["run"] == "ft" and len(info["source"]["sha256"]) == 64
        assert "/" not in json.dumps(info["source"])  # no path of this machine
        assert _mode(out / str(version)) & 0o055 == 0o055  # readable by a server's user
        assert _mode(out / str(version) / "saved_model.pb") & 0o044 == 0o044


def test_export_refuses_an_existing_version_without_overwrite(tmp_path):
    ft = make_finetuned_dir(str(tmp_path / "ft"), "classification", sequence_length=16)
    out = tmp_path / "export"
    (out / "3").mkdir(parents=True)
    (out / "3" / "saved_model.pb").write_bytes(b"served now")
    result = kerasbert("export", "--model", ft, "--output", out, "--version", "3", cwd=tmp_path)
    one_line_error(result, "already exists", "--overwrite")
    assert (out / "3" / "saved_model.pb").read_bytes() == b"served now"
