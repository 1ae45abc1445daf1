"""A `--strategy` the machine cannot build fails well (issue 35, item 4):
exit 2, one line naming what is missing, nothing written. The console
script runs as a user runs it (this machine has no TPU and no GPU, and the
tests hide any GPU with CUDA_VISIBLE_DEVICES=""); the other messages are
checked in process, in plain Python."""

import json
import os
import socket
import subprocess
import sys

import pytest

from kerasbert.errors import UsageError
from kerasbert.training import strategy_checks
from kerasbert.training.strategy_checks import check_mirrored
from kerasbert.training.strategy_checks import check_strategy

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "reliability"))
from console import kerasbert, one_line_error, tree  # noqa: E402

NO_TPU_ENV = {"TPU_NAME": "", "COLAB_TPU_ADDR": "", "TF_CONFIG": ""}


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\n")
    (tmp_path / "train.csv").write_text("text,label\ngood,1\nbad,0\n")
    return tmp_path


def _refusal(workdir, argv, **env):
    """(the one error line, whether the folder is unchanged: no run folder,
    no lock file, no parent folder)."""
    before = tree(workdir)
    line = one_line_error(kerasbert(*argv, cwd=workdir, **{**NO_TPU_ENV, **env}))
    return line, tree(workdir) == before


PRETRAIN = ("pretrain", "--preset", "bert_tiny", "--vocab", "vocab.txt", "--data", "data",
            "--output-dir", "runs/p", "--steps", "2")
FINETUNE = ("finetune", "--task", "csv:train.csv", "--preset", "bert_tiny", "--vocab",
            "vocab.txt", "--output-dir", "runs/f")
DISTILL = ("distill", "--teacher", "teacher/backbone.keras", "--vocab", "vocab.txt",
           "--data", "data", "--output-dir", "runs/d", "--steps", "2")


def test_tpu_without_a_tpu(workdir):
    line, unchanged = _refusal(workdir, [*PRETRAIN, "--strategy", "tpu"])
    assert unchanged and all(f in line for f in ("--strategy tpu", "no TPU", "TPU_NAME")), line


@pytest.mark.parametrize("argv", [FINETUNE, DISTILL], ids=lambda a: a[0])
def test_tpu_without_a_tpu_in_process(workdir, argv, no_tpu, monkeypatch, capsys):
    """The other commands' TPU refusal, through `kerasbert.cli.main` in this
    process (the console script's exit is the pretrain case above)."""
    from kerasbert.cli import main

    monkeypatch.chdir(workdir)
    before = tree(workdir)
    code = main([*argv, "--strategy", "tpu"])
    result = subprocess.CompletedProcess(argv, code, *capsys.readouterr())
    line = one_line_error(result)
    assert tree(workdir) == before
    assert all(f in line for f in ("--strategy tpu", "no TPU", "TPU_NAME")), line


def test_mirrored_without_gpus_asks_for_logical_cpus(workdir):
    # The one check that needs TensorFlow's device list: still before the lock.
    line, unchanged = _refusal(workdir, [*PRETRAIN, "--strategy", "mirrored"])
    assert unchanged and "no GPU" in line and "--logical-cpus 2" in line, line


def test_multi_worker_without_tf_config(workdir):
    line, unchanged = _refusal(workdir, [*FINETUNE, "--strategy", "multi_worker"])
    assert unchanged and "TF_CONFIG" in line and "not set" in line, line


# --- the same checks in process ---------------------------------------------


@pytest.fixture
def no_tpu(monkeypatch):
    for name in ("TPU_NAME", "COLAB_TPU_ADDR", "TF_CONFIG", "TPU_ACCELERATOR_TYPE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(strategy_checks, "tpu_vm", lambda: False)


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed once the socket is


@pytest.mark.parametrize("name, tpu, fragment", [
    ("tpu", None, "this machine has no TPU"),
    ("tpu", "local", "--tpu local means this machine's own TPU chips"),
    ("cpu", "my-tpu", "--tpu my-tpu is for --strategy tpu (or auto)"),
    ("mirrored", "my-tpu", "--strategy mirrored does not use a TPU"),
    ("tpu", "grpc://127.0.0.1:notaport", "expected grpc://HOST:PORT"),
    ("gpu", None, "expected one of auto, cpu, mirrored, multi_worker, tpu"),
])
def test_tpu_checks(no_tpu, name, tpu, fragment):
    with pytest.raises(UsageError) as info:
        check_strategy(name, tpu)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_a_tpu_address_that_does_not_answer(no_tpu):
    address = f"grpc://127.0.0.1:{_closed_port()}"
    with pytest.raises(UsageError, match=f"--tpu {address}: no TPU answers at 127.0.0.1"):
        check_strategy("tpu", address)


def test_named_tpus_pass_the_plain_python_check(no_tpu, monkeypatch):
    check_strategy("auto")  # nothing configured: auto picks GPUs or the CPU
    check_strategy("tpu", "my-cloud-tpu")  # a name: the resolver asks the Cloud TPU API
    monkeypatch.setenv("TPU_NAME", "my-cloud-tpu")
    check_strategy("tpu")


GOOD = {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}


@pytest.mark.parametrize("tf_config, fragment", [
    (None, "needs the TF_CONFIG environment variable"),
    ("{not json", "TF_CONFIG is not valid JSON"),
    ({"task": GOOD["task"]}, "TF_CONFIG has no cluster with workers"),
    ({"cluster": {"worker": "a:1"}, "task": GOOD["task"]}, "is not a list of"),
    ({"cluster": GOOD["cluster"]}, "TF_CONFIG has no task"),
    ({**GOOD, "task": {"type": "ps", "index": 0}}, "task type 'ps' is not a job"),
    ({**GOOD, "task": {"type": "worker", "index": 2}}, "task index 2 is out of range"),
])
def test_tf_config_checks(no_tpu, monkeypatch, tf_config, fragment):
    if tf_config is not None:
        monkeypatch.setenv("TF_CONFIG", tf_config if isinstance(tf_config, str)
                           else json.dumps(tf_config))
    with pytest.raises(UsageError) as info:
        check_strategy("multi_worker")
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_a_whole_tf_config_passes(no_tpu, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps(GOOD))
    check_strategy("multi_worker")
    assert strategy_checks.tf_config_cluster() == (GOOD["cluster"], "worker", 1)


def test_mirrored_needs_gpus_or_logical_cpus():
    check_mirrored(num_gpus=1, logical_cpus=0)
    check_mirrored(num_gpus=0, logical_cpus=2)  # how the tests mirror (documented)
    for cpus in (0, 1):
        with pytest.raises(UsageError, match="no GPU on this machine; add --logical-cpus 2"):
            check_mirrored(num_gpus=0, logical_cpus=cpus)


def test_a_tpu_that_fails_to_start_is_one_line(no_tpu, monkeypatch):
    """Past the plain-Python check (a TPU is named), TensorFlow's own errors
    while connecting become one line too, e.g. its "Please provide a TPU
    Name" (without the Cloud TPU API at hand, a fake resolver raises it)."""
    import tensorflow as tf

    from kerasbert.training.strategies import resolve_strategy

    def resolver(tpu=None):
        raise ValueError("Please provide a TPU Name to connect to.\nmore detail")

    monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", resolver)
    monkeypatch.setenv("TPU_NAME", "my-cloud-tpu")
    with pytest.raises(UsageError) as info:
        resolve_strategy("tpu")
    assert str(info.value) == ("--strategy tpu: cannot start the TPU 'my-cloud-tpu': Please "
                               "provide a TPU Name to connect to.")
