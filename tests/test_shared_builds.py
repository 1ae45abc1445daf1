"""kerasbert.testing.shared_builds: one build per name across processes, a
failed build redone, names that cannot escape the root refused."""

import concurrent.futures
import subprocess
import sys

import pytest

from kerasbert.testing import shared_builds
from kerasbert.testing.shared_builds import private_copy
from kerasbert.testing.shared_builds import shared_build

# A process that asks for the build "run": the build sleeps (so the other
# process arrives while it holds the lock) and counts itself in calls.txt.
# The module is loaded from its file: kerasbert.testing's __init__ imports
# Keras, which the module does not need.
ASK = """
import importlib.util, pathlib, sys, time
spec = importlib.util.spec_from_file_location("shared_builds", sys.argv[2])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
shared_build = module.shared_build
root = pathlib.Path(sys.argv[1])
def build(folder):
    with open(root / "calls.txt", "a") as f:
        f.write("x")
    time.sleep(1.0)
    (folder / "made.txt").write_text("made")
print(shared_build(root, "run", build))
"""


def test_two_processes_share_one_build(tmp_path):
    def ask(_):
        return subprocess.run([sys.executable, "-c", ASK, str(tmp_path), shared_builds.__file__], capture_output=True,
                              text=True, check=True, timeout=120).stdout.strip()

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        answers = list(pool.map(ask, range(2)))
    assert answers == [str(tmp_path / "run")] * 2
    assert (tmp_path / "calls.txt").read_text() == "x"
    assert (tmp_path / "run" / "made.txt").read_text() == "made"


def test_a_failed_build_is_redone_from_an_empty_folder(tmp_path):
    def broken(folder):
        (folder / "half.txt").write_text("half")
        raise RuntimeError("build failed")

    with pytest.raises(RuntimeError, match="build failed"):
        shared_build(tmp_path, "run", broken)
    seen = []
    folder = shared_build(tmp_path, "run", lambda f: seen.append(sorted(p.name for p in f.iterdir())))
    assert seen == [[]]  # the half-written file was removed first
    shared_build(tmp_path, "run", lambda f: seen.append("again"))
    assert seen == [[]]  # built once: the marker stands
    copy = private_copy(folder, tmp_path / "copy")
    assert sorted(p.name for p in copy.iterdir()) == []


@pytest.mark.parametrize("name", ["", "../up", "a/b", ".hidden"])
def test_names_are_one_plain_folder(tmp_path, name):
    with pytest.raises(ValueError, match="one plain folder name"):
        shared_build(tmp_path, name, lambda folder: None)
