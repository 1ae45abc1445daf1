"""What each `--strategy` needs from the machine, checked in plain Python
(no TensorFlow) so a run that cannot start is refused at once, in one
line, before anything is written:

    tpu           a TPU: `--tpu ADDRESS` (a grpc:// address that answers, a
                  Cloud TPU name, `local` on a TPU VM), TPU_NAME or
                  COLAB_TPU_ADDR, or a TPU VM's chips (/dev/accel*)
    multi_worker  TF_CONFIG: a cluster with workers and this process's task
    mirrored      GPUs, or `--logical-cpus 2` (or more) without them: that
                  part needs TensorFlow's device list, so
                  `strategies.check_devices` does it once TensorFlow is
                  loaded, still before the run writes anything
    --tpu         only with `--strategy tpu` or `auto`

`strategies.resolve_strategy` runs the same checks, so a library caller
gets the same messages.
"""

import glob
import json
import os
import socket

from kerasbert.errors import UsageError

STRATEGIES = ("auto", "cpu", "mirrored", "multi_worker", "tpu")

# How long `--tpu grpc://HOST:PORT` may take to accept a connection.
CONNECT_TIMEOUT_S = 10.0


def tpu_vm():
    """A TPU VM (Cloud TPU v4+, Colab's TPU runtime) shows its chips as
    /dev/accel* (or /dev/vfio on newer ones, with TPU_ACCELERATOR_TYPE set)
    and sets no TPU_NAME."""
    return bool(glob.glob("/dev/accel*")) or os.path.isdir("/dev/vfio") and bool(
        os.environ.get("TPU_ACCELERATOR_TYPE"))


def tpu_configured(tpu=None):
    """Whether a TPU is named (`--tpu`, TPU_NAME, COLAB_TPU_ADDR) or present."""
    return bool(tpu or os.environ.get("TPU_NAME") or os.environ.get("COLAB_TPU_ADDR")
                or tpu_vm())


def _check_tpu(name, tpu):
    if tpu is not None and name not in ("tpu", "auto"):
        raise UsageError(f"--tpu {tpu} is for --strategy tpu (or auto); --strategy {name} "
                         "does not use a TPU: drop --tpu or pick --strategy tpu.")
    if name == "tpu" and not tpu_configured(tpu):
        raise UsageError(
            "--strategy tpu: this machine has no TPU (no --tpu ADDRESS, no TPU_NAME or "
            "COLAB_TPU_ADDR in the environment, no /dev/accel* chips); run it on a TPU VM "
            "or name one with --tpu, or use --strategy auto, cpu or mirrored.")
    if tpu == "local" and not tpu_vm():
        raise UsageError("--tpu local means this machine's own TPU chips, and it has none "
                         "(no /dev/accel*): run on a TPU VM or give the TPU's address.")
    if tpu and tpu.startswith("grpc://"):
        host, _, port = tpu[len("grpc://"):].rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
        except ValueError:
            raise UsageError(f"--tpu {tpu}: expected grpc://HOST:PORT.") from None
        except OSError as err:
            raise UsageError(f"--tpu {tpu}: no TPU answers at {host}:{port} "
                             f"({err.strerror or err}).") from None


def tf_config_cluster():
    """(cluster, task type, task index) of TF_CONFIG; a UsageError naming
    what is missing when it cannot drive MultiWorkerMirroredStrategy."""
    raw = os.environ.get("TF_CONFIG")
    example = ('{"cluster": {"worker": ["host1:port", "host2:port"]}, '
               '"task": {"type": "worker", "index": 0}}')
    if not raw:
        raise UsageError("--strategy multi_worker needs the TF_CONFIG environment variable "
                         f"(the cluster and this process's task, e.g. {example}); it is not "
                         "set.")
    try:
        config = json.loads(raw)
    except ValueError as err:
        raise UsageError(f"TF_CONFIG is not valid JSON: {err}") from None
    cluster = config.get("cluster") if isinstance(config, dict) else None
    if not isinstance(cluster, dict) or not (cluster.get("worker") or cluster.get("chief")):
        raise UsageError("TF_CONFIG has no cluster with workers (--strategy multi_worker "
                         f"needs e.g. {example}).")
    for job, addresses in cluster.items():
        if not isinstance(addresses, (list, dict)) or not all(
                isinstance(a, str) and a for a in (
                    addresses.values() if isinstance(addresses, dict) else addresses)):
            raise UsageError(f"TF_CONFIG's cluster job {job!r} is not a list of "
                             "\"host:port\" addresses.")
    task = config.get("task")
    if not isinstance(task, dict) or not task.get("type"):
        raise UsageError("TF_CONFIG has no task: which of the cluster's processes this one "
                         "is (\"task\": {\"type\": \"worker\", \"index\": N}).")
    task_type, index = task["type"], task.get("index", 0)
    if task_type not in cluster:
        raise UsageError(f"TF_CONFIG's task type {task_type!r} is not a job of its cluster "
                         f"({', '.join(sorted(cluster))}).")
    size = len(cluster[task_type])
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < size:
        raise UsageError(f"TF_CONFIG's task index {index!r} is out of range: the cluster has "
                         f"{size} {task_type} address(es).")
    return cluster, task_type, index


def check_strategy(name, tpu=None):
    """Refuses a strategy this machine cannot build (see the module doc),
    in plain Python: the TPU, TF_CONFIG and `--tpu` parts."""
    if name not in STRATEGIES:
        raise UsageError(f"--strategy {name!r}: expected one of {', '.join(STRATEGIES)}.")
    _check_tpu(name, tpu)
    if name == "multi_worker":
        tf_config_cluster()


def check_mirrored(num_gpus, logical_cpus):
    """`--strategy mirrored` mirrors over the GPUs, or without GPUs over
    `--logical-cpus N` CPU devices (N >= 2); one CPU device is refused."""
    if num_gpus == 0 and (logical_cpus or 0) < 2:
        raise UsageError("--strategy mirrored: no GPU on this machine; add --logical-cpus 2 "
                         "(or more) to mirror over logical CPU devices, or use --strategy "
                         "cpu.")
