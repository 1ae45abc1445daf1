"""Beam pipeline options for `create-pretraining-data --runner ...`
(kerasbert.data.beam_writer): which Beam runner each --runner names, the
options each cannot do without, the SDK worker environments, and the
checks that turn a misconfigured runner into one UsageError up front
instead of a late failure inside Beam.
"""

import importlib.util
import json

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.pipeline_options import PortableOptions

from kerasbert.data.beam_shipping import build_wheel
from kerasbert.errors import UsageError

BEAM_RUNNERS = {
    "direct": "DirectRunner",
    "portable": "PortableRunner",
    "flink": "FlinkRunner",
    "spark": "SparkRunner",
    "dataflow": "DataflowRunner",
}
# Options a runner cannot do without, one of each group (Beam would otherwise
# start an embedded cluster by downloading a job server, or fail late on the
# service).
REQUIRED_OPTIONS = {
    "portable": (("job_endpoint",),),
    "flink": (("flink_master", "job_endpoint"),),
    "spark": (("spark_master_url", "job_endpoint"),),
    "dataflow": (("project",), ("region",), ("temp_location",)),
}
# Runners whose workers start bare: the pipeline stages kerasbert (a wheel)
# and carries the tokenizer by value (kerasbert.data.beam_shipping).
SHIPPING_RUNNERS = ("portable", "flink", "spark", "dataflow")
# Where the portable runners start their SDK workers (--environment_type).
ENVIRONMENT_TYPES = ("DOCKER", "PROCESS", "EXTERNAL", "LOOPBACK")


def installed(module):
    """Whether `module` can be imported (False when its parent package is missing)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def _option_given(args, name):
    return any(a == f"--{name}" or a.startswith(f"--{name}=") for a in args)


def _option_value(args, name):
    for i, a in enumerate(args):
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
        if a == f"--{name}" and i + 1 < len(args):
            return args[i + 1]
    return None


def _check_environment(runner, args):
    """UsageError for an SDK worker environment a portable runner cannot
    start (Beam would fail late, with a traceback)."""
    portable = PipelineOptions(args).view_as(PortableOptions)
    kind = portable.environment_type or "DOCKER"
    if kind not in ENVIRONMENT_TYPES:
        raise UsageError(f"--environment_type={kind}: expected one of "
                         f"{', '.join(ENVIRONMENT_TYPES)} (--runner {runner}).")
    config = portable.environment_config
    if kind == "PROCESS":
        example = "--environment_config='{\"command\": \"/opt/kerasbert/beam/boot.sh\"}'"
        if config:
            try:
                command = json.loads(config).get("command")
            except (ValueError, AttributeError):
                raise UsageError(f"--environment_config for PROCESS is JSON naming the worker's "
                                 f"boot command, e.g. {example}; got {config!r}.") from None
        else:
            command = portable.lookup_environment_option("process_command")
        if not command:
            raise UsageError(f"--environment_type=PROCESS needs the worker's boot command: "
                             f"{example}.")
    if kind == "EXTERNAL" and not config and not portable.lookup_environment_option(
            "external_service_address"):
        raise UsageError("--environment_type=EXTERNAL needs the worker pool's address: "
                         "--environment_config=HOST:PORT.")
    if kind == "LOOPBACK" and config:
        raise UsageError("--environment_type=LOOPBACK takes no --environment_config.")
    return kind


def pipeline_options(runner, workers, pipeline_args, staging_dir=None):
    """Beam PipelineOptions for --runner; UsageError naming a missing
    package or option of that runner. For a runner whose workers start bare
    (SHIPPING_RUNNERS) a wheel of kerasbert is written into `staging_dir`
    and staged with --extra_package (except for LOOPBACK workers, which are
    this process)."""
    args = list(pipeline_args)
    if _option_given(args, "runner"):
        raise UsageError("give the runner as --runner (direct, portable, flink, spark, "
                         "dataflow), not as a pipeline option.")
    for group in REQUIRED_OPTIONS.get(runner, ()):
        if not any(_option_given(args, name) for name in group):
            named = " or ".join(f"--{name}=..." for name in group)
            raise UsageError(
                f"--runner {runner} needs the pipeline option {named} "
                f"(pass it after the other flags: -- --{group[0]}=VALUE).")
    if runner == "dataflow":
        if not installed("google.cloud.storage"):  # apache-beam[gcp]
            raise UsageError(
                "--runner dataflow needs apache-beam's Google Cloud extra, which is not "
                "installed: pip install 'kerasbert[dataflow]' (apache-beam[gcp]).")
    environment = None
    if runner in ("portable", "flink", "spark"):
        environment = _check_environment(runner, args)
        if runner == "flink" and _option_value(args, "flink_master") in ("[local]", "[auto]") \
                and not _option_given(args, "environment_type"):
            environment = "LOOPBACK"  # Beam's default for an embedded Flink
    if runner in SHIPPING_RUNNERS and environment != "LOOPBACK":
        if staging_dir is None:
            raise ValueError(f"--runner {runner} stages kerasbert: give a staging_dir")
        args.append(f"--extra_package={build_wheel(staging_dir)}")
    if runner == "direct":
        if not _option_given(args, "direct_num_workers"):
            args.append(f"--direct_num_workers={workers}")
        if not _option_given(args, "direct_running_mode"):
            mode = "multi_processing" if workers > 1 else "in_memory"
            args.append(f"--direct_running_mode={mode}")
    return PipelineOptions([f"--runner={BEAM_RUNNERS[runner]}", *args])


def is_remote(path):
    """Whether `path` is on a remote Beam file system (gs://, s3://, ...)."""
    return "://" in path


def check_paths(runner, inputs, output_dir):
    """UsageError for a local input or output path on a runner that reads and
    writes only remote ones (Dataflow)."""
    if runner == "dataflow":
        for path in [output_dir] + [i for i in inputs if not i.startswith("tfds:")]:
            if not is_remote(path):
                raise UsageError(
                    f"--runner dataflow reads and writes through Cloud Storage: {path} is a "
                    "local path (use gs://BUCKET/...).")
