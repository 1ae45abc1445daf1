"""Task metrics: GLUE, SQuAD EM/F1, seqeval.

Pure NumPy/Python: importing this package imports neither TensorFlow nor
scikit-learn/scipy/seqeval (those load on a metric's first call), so the CLI
and exported graphs do not depend on them.

- classification: accuracy, f1, matthews_corrcoef, confusion_matrix
- regression: pearson, spearman, correlations (+ pearson_spearman_avg)
- tagging: tagging_metrics, entity_f1, classification_report (seqeval)
- squad: normalize_answer, exact_match, token_f1, squad_v1_metrics,
  squad_v2_metrics, best_null_threshold, gold_from_squad_json
- glue: glue_metrics, glue_main_metric, glue_task_name, GLUE_METRICS
- translation: bleu (sacreBLEU's corpus BLEU, in [0, 100])

Scores are fractions (SQuAD too, not x100); BLEU is sacreBLEU's 0-100. Bad input raises ValueError naming
the argument and the problem.
"""

from kerasbert.metrics.classification import (
    accuracy,
    confusion_matrix,
    f1,
    matthews_corrcoef,
)
from kerasbert.metrics.glue import (
    GLUE_MAIN_METRIC,
    GLUE_METRICS,
    glue_main_metric,
    glue_metrics,
    glue_task_name,
)
from kerasbert.metrics.regression import correlations, pearson, spearman
from kerasbert.metrics.squad import (
    best_null_threshold,
    exact_match,
    gold_from_squad_json,
    normalize_answer,
    squad_v1_metrics,
    squad_v2_metrics,
    token_f1,
)
from kerasbert.metrics.tagging import classification_report, entity_f1, tagging_metrics
from kerasbert.metrics.translation import bleu

__all__ = [
    "GLUE_MAIN_METRIC",
    "GLUE_METRICS",
    "accuracy",
    "best_null_threshold",
    "bleu",
    "classification_report",
    "confusion_matrix",
    "correlations",
    "entity_f1",
    "exact_match",
    "f1",
    "glue_main_metric",
    "glue_metrics",
    "glue_task_name",
    "gold_from_squad_json",
    "matthews_corrcoef",
    "normalize_answer",
    "pearson",
    "spearman",
    "squad_v1_metrics",
    "squad_v2_metrics",
    "tagging_metrics",
    "token_f1",
]
