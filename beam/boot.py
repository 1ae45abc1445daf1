"""The second half of beam/boot.sh, run by the worker's fresh environment.

Fetches the job's staged artifacts from the artifact endpoint, installs
them into this environment, and becomes the Beam SDK worker. What it did
is written to SEMI_PERSIST_DIR/boot.json (which artifacts came, whether
kerasbert was importable before and after the install, and from where).
"""

import argparse
import json
import os
import shlex
import subprocess
import sys

import grpc
from apache_beam.portability import common_urns
from apache_beam.portability.api import beam_artifact_api_pb2
from apache_beam.portability.api import beam_artifact_api_pb2_grpc
from apache_beam.portability.api import beam_provision_api_pb2
from apache_beam.portability.api import beam_provision_api_pb2_grpc
from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.portability.api import endpoints_pb2
from google.protobuf import json_format
from google.protobuf import text_format

ENDPOINTS = ("provision_endpoint", "artifact_endpoint", "control_endpoint", "logging_endpoint")
TIMEOUT_S = 120


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--id", required=True)
    for name in ENDPOINTS:
        parser.add_argument(f"--{name}", required=True)
    parser.add_argument("--semi_persist_dir", required=True)
    args, _ = parser.parse_known_args(argv)  # later contracts may add flags
    return args


def provision_info(args, metadata):
    channel = grpc.insecure_channel(args.provision_endpoint)
    stub = beam_provision_api_pb2_grpc.ProvisionServiceStub(channel)
    return stub.GetProvisionInfo(beam_provision_api_pb2.GetProvisionInfoRequest(),
                                 metadata=metadata, timeout=TIMEOUT_S).info


def staged_name(artifact, index):
    """The file name the submitter staged an artifact under."""
    if artifact.role_urn == common_urns.artifact_roles.STAGING_TO.urn:
        name = beam_runner_api_pb2.ArtifactStagingToRolePayload.FromString(
            artifact.role_payload).staged_name
    elif artifact.role_urn == common_urns.artifact_roles.PIP_REQUIREMENTS_FILE.urn:
        name = "requirements.txt"
    else:
        name = f"artifact-{index}"
    if not name or name != os.path.basename(name) or name in (".", ".."):
        raise SystemExit(f"boot: refusing the staged name {name!r}")
    return name


def fetch_artifacts(args, info, folder, metadata):
    """Writes every dependency of this worker's environment into `folder`;
    returns their names in order."""
    if not info.dependencies:
        return []
    channel = grpc.insecure_channel(args.artifact_endpoint)
    stub = beam_artifact_api_pb2_grpc.ArtifactRetrievalServiceStub(channel)
    resolved = stub.ResolveArtifacts(
        beam_artifact_api_pb2.ResolveArtifactsRequest(artifacts=info.dependencies),
        metadata=metadata, timeout=TIMEOUT_S).replacements
    os.makedirs(folder, exist_ok=True)
    names = []
    for index, artifact in enumerate(resolved):
        name = staged_name(artifact, index)
        with open(os.path.join(folder, name), "wb") as f:
            for chunk in stub.GetArtifact(beam_artifact_api_pb2.GetArtifactRequest(
                    artifact=artifact), metadata=metadata, timeout=TIMEOUT_S):
                f.write(chunk.data)
        names.append(name)
    return names


def pip(folder, *args):
    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check",
               "--no-input", "--find-links", folder,
               *shlex.split(os.environ.get("KERASBERT_BOOT_PIP_ARGS", "")), *args]
    print("boot:", " ".join(command), file=sys.stderr, flush=True)
    subprocess.run(command, check=True, stdout=sys.stderr)


def install(folder, names):
    """Installs what the job staged, in the order Beam's SDK containers do:
    requirements, the extra packages in their listed order (each forced in
    over any installed copy, then its dependencies), the setup.py package."""
    installed = []
    if "requirements.txt" in names:
        pip(folder, "-r", os.path.join(folder, "requirements.txt"))
        installed.append("requirements.txt")
    if "extra_packages.txt" in names:
        with open(os.path.join(folder, "extra_packages.txt"), encoding="utf-8") as f:
            packages = [line.strip() for line in f if line.strip()]
        for package in packages:
            path = os.path.join(folder, staged_basename(package))
            pip(folder, "--upgrade", "--force-reinstall", "--no-deps", path)
            pip(folder, path)
            installed.append(os.path.basename(path))
    if "workflow.tar.gz" in names:
        pip(folder, os.path.join(folder, "workflow.tar.gz"))
        installed.append("workflow.tar.gz")
    return installed


def staged_basename(name):
    if name != os.path.basename(name):
        raise SystemExit(f"boot: refusing the extra package name {name!r}")
    return name


def kerasbert_origin():
    """Where this environment imports kerasbert from ("" when it cannot),
    asked of a new interpreter (this one has cached its answer)."""
    done = subprocess.run(
        [sys.executable, "-c",
         "import importlib.util as u; s = u.find_spec('kerasbert'); print(s.origin if s else '')"],
        check=True, capture_output=True, text=True)
    return done.stdout.strip()


def descriptor(url):
    return text_format.MessageToString(endpoints_pb2.ApiServiceDescriptor(url=url))


def main(argv):
    args = parse_args(argv)
    metadata = [("worker_id", args.id)]
    info = provision_info(args, metadata)
    folder = os.path.join(args.semi_persist_dir, "staged")
    report = {"python": sys.executable, "kerasbert_before": kerasbert_origin()}
    report["staged"] = fetch_artifacts(args, info, folder, metadata)
    report["installed"] = install(folder, report["staged"])
    report["kerasbert_after"] = kerasbert_origin()
    with open(os.path.join(args.semi_persist_dir, "boot.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    print(f"boot: {json.dumps(report)}", file=sys.stderr, flush=True)

    env = dict(os.environ)
    env.update(
        WORKER_ID=args.id,
        PIPELINE_OPTIONS=json_format.MessageToJson(info.pipeline_options),
        SEMI_PERSISTENT_DIRECTORY=args.semi_persist_dir,
        LOGGING_API_SERVICE_DESCRIPTOR=descriptor(args.logging_endpoint),
        CONTROL_API_SERVICE_DESCRIPTOR=descriptor(args.control_endpoint),
        RUNNER_CAPABILITIES=" ".join(info.runner_capabilities),
    )
    if info.HasField("status_endpoint"):
        env["STATUS_API_SERVICE_DESCRIPTOR"] = text_format.MessageToString(info.status_endpoint)
    worker = [sys.executable, "-m", "apache_beam.runners.worker.sdk_worker_main"]
    os.execve(sys.executable, worker, env)


if __name__ == "__main__":
    main(sys.argv[1:])
