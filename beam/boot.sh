#!/usr/bin/env bash
# kerasbert's SDK worker boot for Beam's PROCESS environment.
#
#   --environment_type=PROCESS \
#   --environment_config='{"command": "/opt/kerasbert/beam/boot.sh"}'
#
# The runner (a Flink or Spark task manager, Beam's job service) starts this
# command for each SDK worker with the flags of Beam's worker contract:
# --id, --provision_endpoint, --artifact_endpoint, --control_endpoint,
# --logging_endpoint (and maybe --semi_persist_dir). Like the boot program of
# Beam's SDK containers it then
#   1. makes a fresh virtual environment under the worker's folder;
#   2. (boot.py) fetches the job's staged artifacts from the artifact
#      endpoint and installs them there: requirements.txt, the packages of
#      extra_packages.txt in order (kerasbert's wheel), workflow.tar.gz;
#   3. (boot.py) starts apache_beam.runners.worker.sdk_worker_main with the
#      environment variables it reads.
#
# Settings (environment variables; a PROCESS environment passes its "env"):
#   KERASBERT_BOOT_PYTHON  the Python that makes the environment (python3).
#   KERASBERT_BOOT_SITE    a site-packages folder with the third-party stack
#                          (apache-beam, tensorflow, ...: what
#                          `pip install -c constraints.txt 'kerasbert[flink]'`
#                          installs). The environment sees all of it but
#                          kerasbert, which comes only from the job's wheel.
#                          Unset: the environment sees KERASBERT_BOOT_PYTHON's
#                          own site-packages (--system-site-packages).
#   KERASBERT_BOOT_PIP_ARGS extra pip flags, e.g. "--no-index" on hosts that
#                          must not reach a package index (the dependencies
#                          then must be in the stack already).
set -euo pipefail

semi=""
for arg in "$@"; do
  case "$arg" in
    --semi_persist_dir=*) semi="${arg#*=}" ;;
  esac
done
if [ -z "$semi" ]; then
  semi="$(mktemp -d "${TMPDIR:-/tmp}/kerasbert-worker.XXXXXX")"
fi
mkdir -p "$semi"
here="$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)"
python="${KERASBERT_BOOT_PYTHON:-python3}"
venv="$semi/venv"

# One environment per worker folder; a restarted worker reuses it.
if [ ! -x "$venv/bin/python" ]; then
  if [ -n "${KERASBERT_BOOT_SITE:-}" ]; then
    "$python" -m venv --without-pip "$venv"
    # The stack, seen through links to each of its entries but kerasbert's
    # (its package, its metadata, an editable install's finder and .pth).
    stack="$semi/stack"
    mkdir -p "$stack"
    for entry in "$KERASBERT_BOOT_SITE"/*; do
      name="${entry##*/}"
      case "$name" in
        kerasbert|kerasbert-*|kerasbert.*|__editable__*kerasbert*) continue ;;
      esac
      ln -s "$entry" "$stack/$name"
    done
    # A site folder (not a bare path), so the stack's own .pth files apply.
    "$venv/bin/python" -c '
import os, sys, sysconfig
pth = os.path.join(sysconfig.get_paths()["purelib"], "kerasbert-boot-stack.pth")
with open(pth, "w") as f:
    f.write("import site; site.addsitedir(%r)\n" % sys.argv[1])
' "$stack"
  else
    "$python" -m venv --system-site-packages --without-pip "$venv"
  fi
fi

# Nothing of the caller's folder or Python settings leaks into the worker.
cd "$semi"
unset PYTHONPATH PYTHONHOME PYTHONSTARTUP
export PYTHONSAFEPATH=1 PYTHONNOUSERSITE=1
exec "$venv/bin/python" "$here/boot.py" "$@" --semi_persist_dir="$semi"
