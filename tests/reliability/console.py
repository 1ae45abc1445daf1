"""Runs the installed `kerasbert` console script the way a user does: a
fresh interpreter per command, from a working directory of the test's
choosing, and checks what a user sees (exit code, one-line errors)."""

import os
import re
import signal
import subprocess
import sys
import time

# The console script pip installed next to this interpreter (.venv/bin/kerasbert).
KERASBERT = os.path.join(os.path.dirname(sys.executable), "kerasbert")

TINY_BERT = ("--set", "num_layers=1", "--set", "hidden_dim=32", "--set", "num_heads=2",
             "--set", "intermediate_dim=64", "--set", "max_sequence_length=64")


def env(**extra):
    """The environment of a user's shell: no PYTHONPATH into the repository
    (the installed package is what runs), quiet TF logs, CPU only."""
    out = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", PYTHONHASHSEED="0")
    out.update(extra)
    return out


def kerasbert(*args, cwd, timeout=300, input=None, **env_extra):
    """`kerasbert ARGS` in a fresh process; returns the CompletedProcess
    (text stdout/stderr)."""
    return subprocess.run([KERASBERT, *map(str, args)], cwd=str(cwd), env=env(**env_extra),
                          capture_output=True, text=True, timeout=timeout, input=input,
                          errors="replace")


def in_process(*args, cwd=None):
    """`kerasbert ARGS` through `kerasbert.cli.main` in this process (from
    `cwd` when given): a CompletedProcess like `kerasbert`'s, for the same
    checks (`ok`, `one_line_error`) without a second TensorFlow start. The
    twin of a console-script test; it cannot see what crosses processes."""
    import contextlib
    import io

    from kerasbert.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.ExitStack() as stack:
        if cwd is not None:
            stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        code = main([str(arg) for arg in args])
    return subprocess.CompletedProcess([KERASBERT, *map(str, args)], code, out.getvalue(),
                                       err.getvalue())


# Runs the installed console script's own file in a fresh interpreter and,
# at exit, writes the process's peak resident memory since it started
# (VmHWM: the memory of this program, not of the test process it was
# forked from, which `ru_maxrss` of a forked child also counts).
_MEASURED = """
import atexit, runpy, sys
def _peak(path=sys.argv[1]):
    with open("/proc/self/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    with open(path, "w") as out:
        out.write(str(kib * 1024))
atexit.register(_peak)
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def measured(*args, cwd, timeout=300, preexec_fn=None, env_extra=None):
    """(CompletedProcess, peak resident bytes) of `kerasbert ARGS` run from
    the installed console script in a fresh process (`preexec_fn` may set
    its limits, e.g. RLIMIT_AS)."""
    import tempfile

    with tempfile.NamedTemporaryFile("r", suffix=".peak") as peak:
        result = subprocess.run(
            [sys.executable, "-c", _MEASURED, peak.name, KERASBERT, *map(str, args)],
            cwd=str(cwd), env=env(**(env_extra or {})), capture_output=True, text=True,
            timeout=timeout, errors="replace", preexec_fn=preexec_fn)
        text = peak.read().strip()
    return result, int(text) if text else None


def ok(result):
    """Asserts exit 0 (showing the output when not); returns stdout."""
    assert result.returncode == 0, (
        f"exit {result.returncode}\n--- stdout\n{result.stdout[-4000:]}\n"
        f"--- stderr\n{result.stderr[-4000:]}")
    return result.stdout


def one_line_error(result, *fragments):
    """Asserts exit 2 with exactly one `error:` line on stderr and no
    traceback; each fragment must appear in that line. Returns the line."""
    stderr = result.stderr
    assert result.returncode == 2, f"exit {result.returncode}\n{stderr[-4000:]}"
    assert "Traceback" not in stderr, stderr[-4000:]
    errors = [line for line in stderr.splitlines() if re.search(r"(^|: )error: ", line)]
    assert len(errors) == 1, stderr[-4000:]
    for fragment in fragments:
        assert fragment in errors[0], f"{fragment!r} not in {errors[0]!r}"
    return errors[0]


def tree(folder):
    """{relative path: (size, mtime)} of everything under `folder`: equal
    before and after a refused command when it wrote nothing."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            stat = os.lstat(path)
            found[os.path.relpath(path, folder)] = (stat.st_size, stat.st_mtime_ns)
    return found


def start(*args, cwd, **env_extra):
    """`kerasbert ARGS` started in the background (its own process group)."""
    return subprocess.Popen([KERASBERT, *map(str, args)], cwd=str(cwd), env=env(**env_extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def kill_when(process, condition, timeout=240, poll=0.05):
    """SIGKILLs `process` (and its group) as soon as `condition()` is true;
    returns True if it was killed, False if it ended first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        if condition():
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return True
        time.sleep(poll)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    raise AssertionError(f"condition not reached in {timeout} s")
