"""Launch a local TF_CONFIG cluster of worker processes (multi-worker tests)."""

import json
import os
import subprocess
import tempfile
import time

from kerasbert.testing.ports import PORT_TAKEN
from kerasbert.testing.ports import free_ports


def run_workers(command, cwd, workers=2, env=None, attempts=3, timeout=400):
    """Runs `command` once per worker of a TF_CONFIG cluster on fresh local
    ports (worker 0 is the chief) and returns each worker's stdout.

    When a worker fails the others are stopped (they would wait for it);
    when it failed because its port was taken before it could bind it (the
    cluster never formed, nothing was trained), all start over on other
    ports, up to `attempts` times. Any other failure raises AssertionError
    with the end of the failed worker's stdout and stderr.

    Args:
        command: argv list (a console script, `sys.executable` and a
            script, ...).
        cwd: the working directory of every worker.
        env: extra environment variables (on top of `os.environ`).
    """
    for attempt in range(attempts):
        cluster = {"worker": [f"127.0.0.1:{p}" for p in free_ports(workers)]}
        procs, logs = [], []
        for index in range(workers):
            environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {}),
                               TF_CONFIG=json.dumps({"cluster": cluster,
                                                     "task": {"type": "worker", "index": index}}))
            out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
            logs.append((out, err))
            procs.append(subprocess.Popen([str(c) for c in command], env=environment,
                                          cwd=str(cwd), stdout=out, stderr=err, text=True))
        deadline = time.time() + timeout
        while any(p.poll() is None for p in procs) and time.time() < deadline:
            if any(p.poll() not in (None, 0) for p in procs):
                break
            time.sleep(0.2)
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        outputs = []
        for out, err in logs:
            out.seek(0)
            err.seek(0)
            outputs.append((out.read(), err.read()))
            out.close()
            err.close()
        failed = [(out, err) for p, (out, err) in zip(procs, outputs) if p.returncode != 0]
        if not failed:
            return [out for out, _ in outputs]
        taken = any(marker in err for _, err in failed for marker in PORT_TAKEN)
        if not taken or attempt == attempts - 1:
            out, err = failed[0]
            raise AssertionError(out[-2000:] + err[-3000:])
