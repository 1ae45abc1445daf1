"""GLUE task -> metrics mapping, and that the package imports no heavy library."""

import json
import subprocess
import sys

import numpy as np
import pytest

from kerasbert.metrics import GLUE_METRICS, glue_main_metric, glue_metrics, glue_task_name

EXPECTED_KEYS = {
    "cola": {"mcc"},
    "sst2": {"accuracy"},
    "mnli": {"accuracy"},
    "qnli": {"accuracy"},
    "rte": {"accuracy"},
    "wnli": {"accuracy"},
    "mrpc": {"accuracy", "f1"},
    "qqp": {"accuracy", "f1"},
    "stsb": {"pearson", "spearman", "pearson_spearman_avg"},
}


@pytest.mark.parametrize("task", sorted(EXPECTED_KEYS))
def test_each_task_reports_its_metrics(task):
    if task == "stsb":
        result = glue_metrics(f"glue/{task}", [0.0, 2.5, 5.0], [0.5, 2.0, 4.5])
    else:
        result = glue_metrics(f"glue/{task}", [0, 1, 1, 0], [0, 1, 0, 0])
    assert set(result) == EXPECTED_KEYS[task]
    assert glue_main_metric(task) in result
    assert all(isinstance(v, float) for v in result.values())


def test_values_hand_worked():
    # labels 0 1 1 0, preds 0 1 0 0: TP 1, FN 1, FP 0, TN 2
    # accuracy 3/4; F1: P 1, R 1/2 -> 2/3
    # MCC = (1*2 - 0*1) / sqrt((1+0)(1+1)(2+0)(2+1)) = 2 / sqrt(12)
    assert glue_metrics("mrpc", [0, 1, 1, 0], [0, 1, 0, 0]) == pytest.approx(
        {"accuracy": 0.75, "f1": 2 / 3})
    assert glue_metrics("cola", [0, 1, 1, 0], [0, 1, 0, 0])["mcc"] == pytest.approx(
        2 / np.sqrt(12))


def test_logits_are_argmaxed_and_names_normalised():
    logits = np.array([[2.0, -1.0, 0.0], [0.0, 3.0, 1.0], [0.1, 0.2, 0.3]])
    assert glue_metrics("glue/mnli_mismatched", [0, 1, 2], logits) == {"accuracy": 1.0}
    assert glue_task_name("SST-2") == "sst2"
    assert glue_task_name("sts-b") == "stsb"
    assert set(GLUE_METRICS) >= set(EXPECTED_KEYS)


def test_stsb_accepts_column_predictions():
    result = glue_metrics("stsb", [1.0, 2.0, 3.0, 4.0], [[1.0], [3.0], [2.0], [4.0]])
    assert result["pearson"] == pytest.approx(0.8)


def test_unknown_task():
    with pytest.raises(ValueError, match="unknown GLUE task 'glue/imdb'; known: ax, cola"):
        glue_metrics("glue/imdb", [0], [0])


def test_import_loads_no_tensorflow_or_sklearn():
    code = (
        "import json, sys, kerasbert.metrics; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'tensorflow', 'keras', 'sklearn', 'scipy', 'seqeval'})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []
