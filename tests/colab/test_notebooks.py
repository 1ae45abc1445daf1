"""The Colab notebooks (colab/*.ipynb) run top to bottom in smoke mode.

Each notebook is executed with nbclient in a fresh kernel (KERASBERT_SMOKE=1,
offline: TFDS data come from `tfds.testing.mock_data`), in a temporary
directory; any cell error fails the test, and the plots a notebook promises
must come out as inline PNG images. The committed files are checked too:
no outputs, the Colab badge, the guarded install cell, the SMOKE parameters
cell, and KERAS_BACKEND set before the first Keras import.
"""

import os
import pathlib
import re
import sys
import time

import nbformat
import pytest

COLAB = pathlib.Path(__file__).resolve().parents[2] / "colab"
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
}
CELL_TIMEOUT = 300


def _path(name):
    return COLAB / f"{name}.ipynb"


def test_every_notebook_is_tested():
    assert sorted(p.stem for p in COLAB.glob("*.ipynb")) == sorted(NOTEBOOKS)


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
    assert "colab-badge.svg" in first.source and f"colab/{name}.ipynb" in first.source
    code = [c for c in nb.cells if c.cell_type == "code"]
    # Install cell: pinned, and skipped when kerasbert is importable.
    install = code[0].source
    assert 'find_spec("kerasbert") is None' in install and "constraints.txt" in install
    assert re.search(r"KERASBERT_REF = \"[^\"]+\"", install)
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


@pytest.mark.parametrize("name", sorted(NOTEBOOKS))
def test_notebook_runs_in_smoke_mode(name, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("KERASBERT_SMOKE", "1")
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    # The kernel is this interpreter (ipykernel's native "python3" spec), and
    # the venv's console scripts (`kerasbert`) are on its PATH.
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "cache"))
    nb = nbformat.read(_path(name), as_version=4)
    client = NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
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
