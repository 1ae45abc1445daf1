"""Loads a bench script (bench/ is not a package) as a module for its test."""

import importlib.util
import pathlib

BENCH_DIR = pathlib.Path(__file__).resolve().parents[2] / "bench"


def load_bench(name):
    spec = importlib.util.spec_from_file_location(name, BENCH_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
