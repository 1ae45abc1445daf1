"""`tf.distribute` strategies by name, and who is the chief.

    resolve_strategy("auto")          TPU if one is configured (TPU_NAME,
                                      COLAB_TPU_ADDR, or a TPU VM's
                                      /dev/accel*), else all GPUs (Mirrored
                                      when > 1), else the CPU
    resolve_strategy("cpu")           OneDeviceStrategy("/cpu:0")
    resolve_strategy("mirrored")      MirroredStrategy over every GPU, or over
                                      the logical CPU devices when there is
                                      no GPU (see `split_cpu`)
    resolve_strategy("multi_worker")  MultiWorkerMirroredStrategy from TF_CONFIG
    resolve_strategy("tpu", tpu=ADDR) TPUStrategy via TPUClusterResolver

Every strategy is driven by the same custom loop (kerasbert.training.loop);
the TPU branch differs only in how the strategy is built.
"""

import glob
import json
import os

import tensorflow as tf

from kerasbert.errors import UsageError

STRATEGIES = ("auto", "cpu", "mirrored", "multi_worker", "tpu")


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


def _tpu_vm():
    """A TPU VM (Cloud TPU v4+, Colab's TPU runtime) shows its chips as
    /dev/accel* (or /dev/vfio on newer ones) and sets no TPU_NAME."""
    return bool(glob.glob("/dev/accel*")) or os.path.isdir("/dev/vfio") and bool(
        os.environ.get("TPU_ACCELERATOR_TYPE"))


def _tpu_configured(tpu):
    return bool(tpu or os.environ.get("TPU_NAME") or os.environ.get("COLAB_TPU_ADDR")
                or _tpu_vm())


def _tpu_strategy(tpu):
    # `tpu` is a gRPC address, a TPU name, or "local" (TPU VM); None lets the
    # resolver read TPU_NAME / COLAB_TPU_ADDR.
    if tpu is None and _tpu_vm() and not (os.environ.get("TPU_NAME")
                                          or os.environ.get("COLAB_TPU_ADDR")):
        tpu = "local"
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def _mirrored_strategy():
    gpus = tf.config.list_logical_devices("GPU")
    devices = [d.name for d in (gpus or tf.config.list_logical_devices("CPU"))]
    # Without GPUs, MirroredStrategy() would take only CPU:0; the logical CPU
    # devices (split_cpu) are named explicitly instead.
    return tf.distribute.MirroredStrategy(devices)


def _multi_worker_strategy():
    if "TF_CONFIG" not in os.environ:
        raise UsageError("--strategy multi_worker needs the TF_CONFIG environment "
                         "variable (cluster spec and this worker's task).")
    try:
        json.loads(os.environ["TF_CONFIG"])
    except ValueError as err:
        raise UsageError(f"TF_CONFIG is not valid JSON: {err}") from err
    return tf.distribute.MultiWorkerMirroredStrategy()


def resolve_strategy(name="auto", tpu=None):
    """A `tf.distribute.Strategy` for a --strategy name (see module doc)."""
    if name not in STRATEGIES:
        raise UsageError(f"--strategy {name!r}: expected one of {', '.join(STRATEGIES)}.")
    if name == "tpu" or (name == "auto" and _tpu_configured(tpu)):
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
