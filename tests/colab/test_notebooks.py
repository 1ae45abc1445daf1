"""The Colab notebooks (colab/*.ipynb) run top to bottom in smoke mode.

Each notebook is executed with nbclient in a fresh kernel (KERASBERT_SMOKE=1,
offline: TFDS data come from `tfds.testing.mock_data`), in a temporary
directory; any cell error fails the test, and the plots a notebook promises
must come out as inline PNG images. The committed files are checked too:
no outputs, the Colab badge, the guarded install cell, the SMOKE parameters
cell, and KERAS_BACKEND set before the first Keras import.

The install cell is tested the way a Colab user meets it: a wheel of this
checkout, a fresh virtual environment that sees the pinned stack but not
kerasbert, the cell's own pip install there, then 01_quickstart in that
environment's kernel.
"""

import contextlib
import importlib.metadata
import importlib.util
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile

import nbformat
import pytest

from slow_marks import slow_covered_by

ROOT = pathlib.Path(__file__).resolve().parents[2]
COLAB = ROOT / "colab"


def _load_install_cell():
    spec = importlib.util.spec_from_file_location("colab_install_cell", COLAB / "install_cell.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


install_cell = _load_install_cell()
# Notebook -> least number of inline PNG images it must show in smoke mode.
NOTEBOOKS = {
    "01_quickstart": 4,               # pretraining curves, fine-tuning curve, confusion matrix, attention map
    "02_glue_finetuning": 3,          # CoLA curves + confusion matrix, MRPC curves
    "03_squad_question_answering": 2,  # training curves, start/end scores
    "04_ner_tagging": 2,              # training curves, per-entity F1
    "05_tf_serving": 1,               # latency / probabilities chart
    "06_model_zoo_tour": 5,           # parameters per preset, BERT + GPT attention maps, BigBird pattern, time/memory
    "07_pretraining_at_scale": 2,     # curve across the preemption, TensorBoard scalars
    "08_published_checkpoints": 2,    # SST-2 training curve, SavedModel probabilities
    "09_reformer_char_lm": 2,         # bits per character, memory against length
    "10_feature_based_vs_fine_tuning": 2,  # accuracy/F1 and wall time per approach, BLEU per epoch
}
CELL_TIMEOUT = 300


def _path(name):
    return COLAB / f"{name}.ipynb"


def test_every_notebook_is_tested():
    assert sorted(p.stem for p in COLAB.glob("*.ipynb")) == sorted(NOTEBOOKS)
    assert [run.values[0] for run in NOTEBOOK_RUNS] == sorted(NOTEBOOKS)


def _code(cell):
    return cell.source if cell.cell_type == "code" else ""


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_committed_notebook_is_clean_and_well_formed(name):
    nb = nbformat.read(_path(name), as_version=4)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, (
                f"{name} cell {i} has outputs: run `python colab/strip_outputs.py`")
    # First cell: title and the Open-in-Colab badge pointing at this file.
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# ")
    assert "colab-badge.svg" in first.source and f"({install_cell.badge_url(name)})" in first.source
    code = [c for c in nb.cells if c.cell_type == "code"]
    # Install cell: the one colab/install_cell.py writes (its behaviour is tested below).
    assert code[0].source == install_cell.CELL, (
        f"{name}: the install cell differs from colab/install_cell.py: run `python colab/install_cell.py`")
    # KERAS_BACKEND is set before any cell imports keras or kerasbert.
    first_keras = next(i for i, c in enumerate(code)
                       if re.search(r"^\s*(import|from)\s+(keras|kerasbert)\b", c.source, re.M))
    backend = next(i for i, c in enumerate(code) if 'os.environ["KERAS_BACKEND"] = "tensorflow"' in c.source)
    assert backend <= first_keras
    cell = code[backend].source
    assert cell.index("KERAS_BACKEND") < re.search(r"^import keras", cell, re.M).start()
    # The runtime cell picks the strategy; a parameters cell has the SMOKE switch.
    assert "resolve_strategy(" in cell
    params = [c.source for c in code
              if 'SMOKE = os.environ.get("KERASBERT_SMOKE", "0") == "1"' in c.source]
    assert len(params) == 1 and "if SMOKE" in params[0]


def _smoke_environment(monkeypatch, tmp_path, bin_dir):
    monkeypatch.setenv("KERASBERT_SMOKE", "1")
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    # The kernel's console scripts (`kerasbert`) come first on its PATH.
    monkeypatch.setenv("PATH", str(bin_dir) + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "cache"))


def _execute(name, tmp_path, kernel_name="python3"):
    """Runs notebook `name` top to bottom in a kernel started in `tmp_path`;
    returns the executed notebook."""
    from nbclient import NotebookClient

    nb = nbformat.read(_path(name), as_version=4)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name=kernel_name,
                            resources={"metadata": {"path": str(tmp_path)}})
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError naming the cell on any error
    seconds = time.perf_counter() - start
    images = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.outputs
                 if "image/png" in o.get("data", {}))
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.get("output_type") == "error"]
    assert not errors
    assert images >= NOTEBOOKS[name], f"{name}: {images} inline images, expected {NOTEBOOKS[name]}"
    print(f"{name}: {seconds:.1f} s, {images} images")
    return nb


def _stdout(nb, index):
    """What code cell `index` printed."""
    cell = [c for c in nb.cells if c.cell_type == "code"][index]
    return "".join(o.get("text", "") for o in cell.outputs
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")


# The default suite runs 01_quickstart's kernel (and checks every committed
# notebook above); each other notebook's run is `slow` (20-120 s apiece: a
# kernel, TensorFlow's import, tiny training), and names the default tests of
# the library calls its cells make. What a slow run adds: the cells themselves,
# in order, with their plots.
# The default-suite tests that the slow notebook runs below name: the
# notebook check above, and the tests of the library calls their cells make.
CLEAN = "tests/colab/test_notebooks.py::test_committed_notebook_is_clean_and_well_formed"
GLUE_THROUGH_TFDS = "tests/training/test_finetune_cli.py::test_glue_tasks_through_tfds"
PAIR_TASK = "tests/tasks/test_text_classifier.py::test_learns_a_pair_task"
QA_FEATURES = "tests/serving/test_qa_serving.py::test_features_match_convert_qa"
EVERY_TASK_TYPE = "tests/training/test_finetune_cli.py::test_every_task_type_runs_end_to_end"
ENTITIES = "tests/tasks/test_token_classifier.py::test_learns_rule_labelled_entities"
SCRIPT_EXPORT = "tests/serving/test_export.py::test_export_model_trained_in_a_script"
BATCHING_FILES = "tests/serving/test_batching.py::test_export_writes_both_files_and_keeps_an_operators_file"
WARMUP = "tests/serving/test_qa_serving.py::test_warmup_requests_pass"
ATTENTION_PLOT = "tests/models/test_attention_maps.py::test_bad_inputs_and_plot"
GPT1_COUNT = "tests/models/gpt/test_gpt_backbone.py::TestGptPresets::test_gpt1_parameter_count_by_parts"
INFO_OVERRIDES = "tests/test_cli.py::test_info_applies_overrides"
PRETRAIN_OUTPUTS = "tests/training/test_pretrain_cli.py::test_run_writes_every_output"
NEEDS_RESUME = "tests/training/test_pretrain_cli.py::test_existing_run_needs_resume"
PUBLISHED_LOADS = ("tests/convert/test_published_checkpoint.py::"
                   "test_the_published_directory_loads_as_published")
LAYOUTS = "tests/serving/test_model_conversion.py::test_every_layout_reads_back_with_the_same_outputs"
REFORMER_LM = "tests/models/reformer/test_reformer_tasks.py::test_causal_lm_trains_saves_and_generates"
FROZEN_ELMO = "tests/models/elmo/test_elmo_tasks.py::test_classification_on_a_frozen_elmo"
BLEU = "tests/tasks/test_text2text_evaluation.py::test_bleu_is_sacrebleus_corpus_bleu"

NOTEBOOK_RUNS = [
    pytest.param("01_quickstart"),
    pytest.param("02_glue_finetuning", marks=slow_covered_by(CLEAN, GLUE_THROUGH_TFDS, PAIR_TASK)),
    pytest.param("03_squad_question_answering",
                 marks=slow_covered_by(CLEAN, QA_FEATURES, EVERY_TASK_TYPE)),
    pytest.param("04_ner_tagging", marks=slow_covered_by(CLEAN, ENTITIES, SCRIPT_EXPORT)),
    pytest.param("05_tf_serving", marks=slow_covered_by(CLEAN, SCRIPT_EXPORT, BATCHING_FILES, WARMUP)),
    pytest.param("06_model_zoo_tour",
                 marks=slow_covered_by(CLEAN, ATTENTION_PLOT, GPT1_COUNT, INFO_OVERRIDES)),
    pytest.param("07_pretraining_at_scale",
                 marks=slow_covered_by(CLEAN, PRETRAIN_OUTPUTS, NEEDS_RESUME)),
    pytest.param("08_published_checkpoints", marks=slow_covered_by(CLEAN, PUBLISHED_LOADS, LAYOUTS)),
    pytest.param("09_reformer_char_lm", marks=slow_covered_by(CLEAN, REFORMER_LM)),
    pytest.param("10_feature_based_vs_fine_tuning", marks=slow_covered_by(CLEAN, FROZEN_ELMO, BLEU)),
]


@pytest.mark.parametrize("name", NOTEBOOK_RUNS)
def test_notebook_runs_in_smoke_mode(name, tmp_path, monkeypatch):
    # The kernel is this interpreter (ipykernel's native "python3" spec), and
    # the venv's console scripts (`kerasbert`) are on its PATH.
    _smoke_environment(monkeypatch, tmp_path, os.path.dirname(sys.executable))
    for variable in (install_cell.FORCE, install_cell.WHEEL, install_cell.CONSTRAINTS):
        monkeypatch.delenv(variable, raising=False)
    nb = _execute(name, tmp_path)
    # kerasbert is importable here, so the install cell does nothing.
    assert _stdout(nb, 0) == "kerasbert is already installed; nothing to do.\n"


# ---- The install cell: what it runs, then a real install in a fresh environment.

_BADGE = re.compile(r"colab\.research\.google\.com/github/([^/]+/[^/]+)/blob/([^/]+)/colab/")


def _run_install_cell(monkeypatch, *, importable, env=()):
    """Executes the committed install cell in this process with pip replaced
    by a recorder; returns (pip commands, printed text)."""
    commands = []

    def fake_run(command, **kwargs):
        commands.append(list(command))
        return subprocess.CompletedProcess(command, 0, "", "")

    real_find_spec = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        if name == "kerasbert" and not importable:
            return None
        return real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", fake_run)
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    for variable in (install_cell.FORCE, install_cell.WHEEL, install_cell.CONSTRAINTS):
        monkeypatch.delenv(variable, raising=False)
    for variable, value in dict(env).items():
        monkeypatch.setenv(variable, value)
    cell = [c for c in nbformat.read(_path("01_quickstart"), as_version=4).cells
            if c.cell_type == "code"][0].source
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(cell, "install cell", "exec"), {"__name__": "__main__"})
    monkeypatch.undo()
    return commands, printed.getvalue()


def test_install_cell_installs_from_the_repository_the_badge_opens(monkeypatch):
    version = importlib.metadata.version("kerasbert")
    for name in sorted(NOTEBOOKS):
        nb = nbformat.read(_path(name), as_version=4)
        repository, ref = _BADGE.search(nb.cells[0].source).groups()
        assert (repository, ref) == (install_cell.GITHUB_REPOSITORY, install_cell.BRANCH)
    commands, printed = _run_install_cell(monkeypatch, importable=False)
    assert commands == [[sys.executable, "-m", "pip", "install", "-q",
                         "-c", f"https://raw.githubusercontent.com/{repository}/{ref}/constraints.txt",
                         f"kerasbert @ git+https://github.com/{repository}@{ref}"]]
    assert printed.startswith(f"installed kerasbert {version} from kerasbert @ git+https://github.com/")


def test_install_cell_does_nothing_when_kerasbert_is_importable_unless_forced(monkeypatch, tmp_path):
    commands, printed = _run_install_cell(monkeypatch, importable=True)
    assert commands == [] and printed == "kerasbert is already installed; nothing to do.\n"
    # Forced: the kerasbert found is uninstalled first, then the wheel installed
    # with the given constraints.
    wheel, constraints = str(tmp_path / "kerasbert-0-py3-none-any.whl"), str(ROOT / "constraints.txt")
    commands, printed = _run_install_cell(monkeypatch, importable=True, env={
        install_cell.FORCE: "1", install_cell.WHEEL: wheel, install_cell.CONSTRAINTS: constraints})
    pip = [sys.executable, "-m", "pip"]
    assert commands == [pip + ["uninstall", "-y", "kerasbert"],
                        pip + ["install", "-q", "-c", constraints, wheel]]
    assert f"from {wheel}" in printed


def test_install_cell_reports_pip_failures(monkeypatch):
    def failing_run(command, **kwargs):
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution found\n")

    cell = install_cell.CELL
    monkeypatch.setattr(subprocess, "run", failing_run)
    monkeypatch.setenv(install_cell.FORCE, "1")
    with pytest.raises(RuntimeError, match=r"(?s)pip uninstall failed \(exit 1\).*No matching distribution"):
        exec(compile(cell, "install cell", "exec"), {"__name__": "__main__"})


def _build_wheel(out):
    """A wheel of this checkout's working tree, built offline from a copy
    (nothing is written into the checkout)."""
    try:
        setuptools_version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("no offline wheel build: setuptools is not installed in this environment")
    major, minor = (int(part) for part in setuptools_version.split(".")[:2])
    if (major, minor) < (70, 1) and importlib.util.find_spec("wheel") is None:
        pytest.skip(f"no offline wheel build: setuptools {setuptools_version} needs the `wheel` "
                    "package, which is not installed in this environment")
    source = out / "source"
    source.mkdir(parents=True)
    for name in ("setup.py", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "kerasbert", source / "kerasbert",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-q", "-w", str(out), str(source)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"pip wheel failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    (wheel,) = out.glob("kerasbert-*.whl")
    return wheel


def _is_kerasbert(entry):
    """kerasbert's own entries in a site-packages folder: its dist-info, its
    editable finder and any .pth file that points at the checkout."""
    if "kerasbert" in entry.name.lower():
        return True
    return entry.suffix == ".pth" and str(ROOT) in entry.read_text(errors="replace")


def _fresh_environment(root):
    """A new virtual environment (no packages of its own, no pip) that sees
    this environment's pinned third-party stack but not kerasbert.

    The stack is a folder of links to every entry of this environment's
    site-packages except kerasbert's, added by a .pth file with
    `site.addsitedir` (so the stack's own .pth files still run). Being outside
    the new environment, pip there treats it as installed but never
    uninstalls from it."""
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site_packages = pathlib.Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True, capture_output=True, text=True).stdout.strip())
    stack = root / "stack"
    stack.mkdir()
    ours = {pathlib.Path(sysconfig.get_path(key)).resolve() for key in ("purelib", "platlib")}
    for folder in sorted(ours):
        for entry in folder.iterdir():
            if not _is_kerasbert(entry) and not (stack / entry.name).exists():
                (stack / entry.name).symlink_to(entry)
    (site_packages / "pinned_stack.pth").write_text(f"import site; site.addsitedir({str(stack)!r})\n")
    return venv, site_packages


_PROBE = """
import importlib.metadata, importlib.util, json
found = {name: importlib.util.find_spec(name) is not None
         for name in ("kerasbert", "tensorflow", "tensorflow_text", "keras", "keras_hub", "ipykernel", "pip")}
try:
    dist = importlib.metadata.distribution("kerasbert")
    installed = {"file": str(importlib.util.find_spec("kerasbert").origin),
                 "url": json.loads(dist.read_text("direct_url.json"))["url"]}
except importlib.metadata.PackageNotFoundError:
    installed = None
print(json.dumps({"found": found, "installed": installed}))
"""


def _probe(python):
    done = subprocess.run([str(python), "-c", _PROBE], capture_output=True, text=True, cwd="/",
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# About 60 s: a wheel, a fresh environment, pip and a kernel there. The
# default suite runs the committed cell with pip recorded (what it installs,
# from where, and its failures) and 01_quickstart in this environment.
@slow_covered_by(
    "tests/colab/test_notebooks.py::test_install_cell_installs_from_the_repository_the_badge_opens",
    "tests/colab/test_notebooks.py::test_install_cell_does_nothing_when_kerasbert_is_importable_unless_forced",
    "tests/colab/test_notebooks.py::test_install_cell_reports_pip_failures",
    "tests/colab/test_notebooks.py::test_notebook_runs_in_smoke_mode")
def test_install_cell_installs_a_wheel_of_this_checkout_in_a_fresh_environment(tmp_path, monkeypatch):
    wheel = _build_wheel(tmp_path / "wheel")
    # The wheel holds every module of the checkout (a package folder without
    # an __init__.py would be missing from a pip install).
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "kerasbert").rglob("*.py")
               if "__pycache__" not in p.parts}
    with zipfile.ZipFile(wheel) as archive:
        missing = modules - set(archive.namelist())
    assert not missing, f"not in the wheel: {sorted(missing)}"

    venv, site_packages = _fresh_environment(tmp_path / "env")
    python = venv / "bin" / "python"
    before = _probe(python)
    assert before["found"] == {"kerasbert": False, "tensorflow": True, "tensorflow_text": True,
                               "keras": True, "keras_hub": True, "ipykernel": True, "pip": True}
    assert before["installed"] is None
    failed = subprocess.run([str(python), "-c", "import kerasbert"], capture_output=True, text=True, cwd="/")
    assert failed.returncode != 0 and "No module named 'kerasbert'" in failed.stderr

    # A kernel spec for the new environment's interpreter.
    kernels = tmp_path / "jupyter" / "kernels" / "kerasbert-fresh-env"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "fresh environment", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    # Nothing of this environment on the kernel's paths: not its console
    # scripts (the notebook's `kerasbert` commands must be the wheel's), not
    # the checkout.
    ours = os.path.dirname(sys.executable)
    monkeypatch.setenv("PATH", os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                                              if p and os.path.realpath(p) != os.path.realpath(ours)))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    notebook_dir = tmp_path / "notebook"
    notebook_dir.mkdir()
    _smoke_environment(monkeypatch, notebook_dir, venv / "bin")
    # The cell installs the wheel, pinned by this checkout's constraints.txt
    # (the repository's raw file on Colab); no index: the pinned stack is
    # already there, so nothing may need a download.
    monkeypatch.setenv(install_cell.WHEEL, str(wheel))
    monkeypatch.setenv(install_cell.CONSTRAINTS, str(ROOT / "constraints.txt"))
    monkeypatch.delenv(install_cell.FORCE, raising=False)
    monkeypatch.setenv("PIP_NO_INDEX", "1")

    nb = _execute("01_quickstart", notebook_dir, kernel_name="kerasbert-fresh-env")

    version = importlib.metadata.version("kerasbert")
    assert _stdout(nb, 0) == f"installed kerasbert {version} from {wheel}\n"
    after = _probe(python)
    assert after["found"]["kerasbert"]
    assert after["installed"] == {"file": str(site_packages / "kerasbert" / "__init__.py"),
                                  "url": wheel.as_uri()}
    assert (venv / "bin" / "kerasbert").exists()
