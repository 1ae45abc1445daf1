"""GLUE task -> metrics, in one place.

    cola, ax                       -> mcc (Matthews correlation)
    sst2, mnli, qnli, rte, wnli    -> accuracy
    mrpc, qqp                      -> accuracy, f1 (binary, positive class 1)
    stsb                           -> pearson, spearman, pearson_spearman_avg

Task names are accepted bare ("cola") or as TFDS names ("glue/cola"); the
MNLI evaluation splits ("mnli_matched", "mnli_mismatched") map to mnli, and
"sst-2"/"sts-b" spellings are accepted.
"""

import numpy as np

from kerasbert.metrics import classification, regression

GLUE_METRICS = {
    "cola": ("mcc",),
    "sst2": ("accuracy",),
    "mrpc": ("accuracy", "f1"),
    "stsb": ("pearson", "spearman", "pearson_spearman_avg"),
    "qqp": ("accuracy", "f1"),
    "mnli": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
    "ax": ("mcc",),
}

# The metric to select checkpoints by (the first one the GLUE paper lists,
# or the average for STS-B).
GLUE_MAIN_METRIC = {
    "cola": "mcc", "sst2": "accuracy", "mrpc": "f1", "stsb": "pearson_spearman_avg",
    "qqp": "f1", "mnli": "accuracy", "qnli": "accuracy", "rte": "accuracy",
    "wnli": "accuracy", "ax": "mcc",
}

_ALIASES = {
    "sst-2": "sst2", "sts-b": "stsb", "mnli_matched": "mnli",
    "mnli_mismatched": "mnli", "mnli-mm": "mnli", "mnli-m": "mnli",
}


def glue_task_name(task):
    """Canonical GLUE task name for `task`; ValueError listing the known ones."""
    if not isinstance(task, str):
        raise ValueError(f"GLUE task must be a string, got {task!r}")
    name = task.strip().lower()
    if name.startswith("glue/"):
        name = name[len("glue/"):]
    name = _ALIASES.get(name, name)
    if name not in GLUE_METRICS:
        raise ValueError(
            f"unknown GLUE task {task!r}; known: {', '.join(sorted(GLUE_METRICS))}"
        )
    return name


def glue_main_metric(task):
    """The key of `glue_metrics`' result to select checkpoints by."""
    return GLUE_MAIN_METRIC[glue_task_name(task)]


def glue_metrics(task, labels, predictions):
    """The GLUE metrics of `task` as {name: float}.

    Classification tasks take class ids [N], or class scores/logits [N, C]
    (their argmax is used). STS-B takes real scores [N] or [N, 1].
    """
    name = glue_task_name(task)
    if name == "stsb":
        return regression.correlations(labels, predictions)
    predictions = np.asarray(predictions)
    if predictions.ndim == 2 and predictions.shape[1] > 1:
        predictions = np.argmax(predictions, axis=-1)
    result = {}
    for metric in GLUE_METRICS[name]:
        if metric == "accuracy":
            result[metric] = classification.accuracy(labels, predictions)
        elif metric == "f1":
            result[metric] = classification.f1(labels, predictions)
        elif metric == "mcc":
            result[metric] = classification.matthews_corrcoef(labels, predictions)
    return result
