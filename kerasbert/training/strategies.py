"""`tf.distribute` strategies by name, and who is the chief.

    resolve_strategy("auto")          TPU if one is configured (TPU_NAME,
                                      COLAB_TPU_ADDR, or a TPU VM's
                                      /dev/accel*), else all GPUs (Mirrored
                                      when > 1), else the CPU
    resolve_strategy("cpu")           OneDeviceStrategy("/cpu:0")
    resolve_strategy("mirrored")      MirroredStrategy over every GPU, or over
                                      the logical CPU devices when there is
                                      no GPU (`split_cpu`, at least 2)
    resolve_strategy("multi_worker")  MultiWorkerMirroredStrategy from TF_CONFIG
    resolve_strategy("tpu", tpu=ADDR) TPUStrategy via TPUClusterResolver

Every strategy is driven by the same custom loop (kerasbert.training.loop);
the TPU branch differs only in how the strategy is built. A strategy the
machine cannot build (no TPU, no TF_CONFIG, mirrored on one CPU device) is a
one-line UsageError (`strategy_checks`), never a TensorFlow traceback.
"""

import json
import os

import tensorflow as tf

from kerasbert.errors import UsageError
from kerasbert.training.strategy_checks import check_mirrored
from kerasbert.training.strategy_checks import check_strategy
from kerasbert.training.strategy_checks import tpu_configured
from kerasbert.training.strategy_checks import tpu_vm


def split_cpu(num_devices):
    """Splits the host CPU into `num_devices` logical devices.

    Must run before TensorFlow initialises its devices (before the first op);
    used to exercise MirroredStrategy on a machine without GPUs.
    """
    if num_devices <= 1:
        return
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * num_devices)
    except RuntimeError as err:
        raise UsageError(f"--logical-cpus {num_devices}: TensorFlow was already "
                         f"initialised ({err}).") from err


def _configured_cpus():
    """The logical CPU devices `split_cpu` asked for (1 when it did not),
    read without initialising TensorFlow's devices."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    return len(tf.config.get_logical_device_configuration(cpu) or ()) or 1


def check_devices(name, logical_cpus=None):
    """The part of the strategy checks that needs TensorFlow's device list
    (`strategy_checks.check_mirrored`): physical devices only, so it may run
    before `split_cpu`. `logical_cpus`: the run's --logical-cpus (None: what
    `split_cpu` configured)."""
    if name == "mirrored":
        cpus = _configured_cpus() if logical_cpus is None else logical_cpus
        check_mirrored(len(tf.config.list_physical_devices("GPU")), cpus)


def _tpu_strategy(tpu):
    # `tpu` is a gRPC address, a TPU name, or "local" (TPU VM); None lets the
    # resolver read TPU_NAME / COLAB_TPU_ADDR.
    if tpu is None and tpu_vm() and not (os.environ.get("TPU_NAME")
                                         or os.environ.get("COLAB_TPU_ADDR")):
        tpu = "local"
    named = tpu or os.environ.get("TPU_NAME") or os.environ.get("COLAB_TPU_ADDR") or "local"
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, OSError, tf.errors.OpError) as err:
        # e.g. "Please provide a TPU Name", a name the Cloud TPU API does not
        # know, a TensorFlow build without TPU kernels ("TPUs not found").
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise UsageError(f"--strategy tpu: cannot start the TPU {named!r}: "
                         f"{first[:300]}") from None
    return tf.distribute.TPUStrategy(resolver)


def _mirrored_strategy():
    gpus = tf.config.list_logical_devices("GPU")
    devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
    # Without GPUs, MirroredStrategy() would take only CPU:0; the logical CPU
    # devices (split_cpu) are named explicitly instead.
    return tf.distribute.MirroredStrategy(devices)


def _multi_worker_strategy():
    return tf.distribute.MultiWorkerMirroredStrategy()


def resolve_strategy(name="auto", tpu=None):
    """A `tf.distribute.Strategy` for a --strategy name (see module doc)."""
    check_strategy(name, tpu)
    check_devices(name)
    if name == "tpu" or (name == "auto" and tpu_configured(tpu)):
        return _tpu_strategy(tpu)
    if name == "multi_worker":
        return _multi_worker_strategy()
    if name == "mirrored":
        return _mirrored_strategy()
    if name == "cpu":
        return tf.distribute.OneDeviceStrategy("/cpu:0")
    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")


def chief_from_environment():
    """Whether this process will be the chief, read from TF_CONFIG before any
    strategy exists (the same rule as `worker_info`): true without TF_CONFIG
    or a cluster. Decides who holds the lock on the run directory."""
    try:
        config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    except json.JSONDecodeError:
        return True  # resolve_strategy reports the bad TF_CONFIG
    task, cluster = config.get("task") or {}, config.get("cluster") or {}
    task_type, task_id = task.get("type"), int(task.get("index") or 0)
    if not task_type or not cluster:
        return True
    return task_type == "chief" or (task_type == "worker" and task_id == 0
                                    and "chief" not in cluster)


def worker_info(strategy):
    """(is_chief, worker_index, num_workers) of this process.

    The chief is task "chief", or worker 0 when the cluster has no chief;
    single-host strategies have one worker that is the chief.
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type or isinstance(strategy, tf.distribute.TPUStrategy):
        return True, 0, 1
    spec = resolver.cluster_spec().as_dict()
    num_workers = len(spec.get("worker", ())) + len(spec.get("chief", ()))
    task_type, task_id = resolver.task_type, resolver.task_id or 0
    index = task_id + (1 if "chief" in spec and task_type == "worker" else 0)
    is_chief = task_type == "chief" or (task_type == "worker" and task_id == 0
                                        and "chief" not in spec)
    return is_chief, index, num_workers
