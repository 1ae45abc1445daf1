"""Loads a bench script (bench/ is not a package) as a module for its test,
and the checks that several benches' tests make of what a script does."""

import importlib.util
import json
import pathlib

import pytest

BENCH_DIR = pathlib.Path(__file__).resolve().parents[2] / "bench"


def load_bench(name):
    spec = importlib.util.spec_from_file_location(name, BENCH_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_quick(name, *flags):
    """Runs bench `name` in this process as `name.py --quick FLAGS`;
    returns what its main returns (the payload it writes with --json)."""
    return load_bench(name).main(["--quick", *flags])


def assert_loads_and_refuses_an_unknown_flag(name, capsys):
    """What the default suite runs of bench `name`: its module loads
    (imports, constants) and its command line refuses a flag it does not
    have (exit 2, the flag named on stderr)."""
    bench = load_bench(name)
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--no-such-flag"])
    assert exit_info.value.code == 2
    assert "--no-such-flag" in capsys.readouterr().err


def assert_rows_saved_and_printed(out, rows, printed, ratio):
    """The bench's --json file `out` holds the same rows as `rows` (the
    payload's, a list of dicts with a "row" name), no temporary file is left
    beside it, and its stdout `printed` has the `ratio` column ("ours/peer")
    and every row's name."""
    assert json.loads(out.read_text())["rows"][0]["row"] == rows[0]["row"]
    assert [p.name for p in out.parent.iterdir()] == [out.name]
    assert ratio in printed
    for row in rows:
        assert row["row"] in printed
