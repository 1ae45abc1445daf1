"""Entity-level tagging metrics (NER) via seqeval.

Inputs: `labels` and `predictions` are lists of sentences, each a list of
label strings such as "B-PER", "I-LOC", "O" (one label per word; sub-token
positions and padding removed). With `label_names`, integer label ids are
accepted too and mapped through it (e.g. TFDS's `ner` ClassLabel names).

An entity counts as correct only when its type and its exact span match; a
partially matched span scores nothing (it is a false positive *and* a false
negative).

Tag schemes: TFDS `conll2003` (and the HF copy of the same
data.deepai.org files) labels are IOB2 — every entity starts with "B-" — while
the original CoNLL-2003 release was IOB1. Hence `scheme="IOB2"` by default.

Modes:
- "conlleval" (default): the chunking rules of the CoNLL `conlleval` script,
  seqeval's default mode — the numbers papers report for CoNLL-2003. Lenient:
  an "I-X" after "O" starts an entity. Handles B/I/E/S/O prefixes, so IOB1,
  IOB2 and IOBES data.
- "strict": seqeval's strict mode for `scheme` ("IOB1", "IOB2", "IOE1",
  "IOE2", "IOBES", "BILOU"): only well-formed chunks of that scheme count.

In both modes every label's prefix is checked against `scheme` first, so a
label like "PER" (no prefix) or "S-LOC" under IOB2 raises ValueError naming
the sentence, position and label instead of being silently mis-parsed.

Scores with no entity at all (0/0) are 0.0, seqeval's `zero_division=0`.
seqeval is imported on first call.
"""

import numpy as np

SCHEMES = ("IOB1", "IOB2", "IOE1", "IOE2", "IOBES", "BILOU")
MODES = ("conlleval", "strict")

_PREFIXES = {
    "IOB1": "BI",
    "IOB2": "BI",
    "IOE1": "IE",
    "IOE2": "IE",
    "IOBES": "BIES",
    "BILOU": "BILU",
}
_CONLLEVAL_SCHEMES = ("IOB1", "IOB2", "IOBES")


def _as_sentences(values, name, label_names):
    if values is None or isinstance(values, (str, bytes)):
        raise ValueError(f"{name} must be a list of label sequences, got {values!r}")
    sentences = []
    for i, sentence in enumerate(values):
        if isinstance(sentence, (str, bytes)):
            raise ValueError(
                f"{name}[{i}] is a string {sentence!r}; expected a list of labels"
            )
        row = []
        for label in list(sentence):
            if isinstance(label, bytes):
                label = label.decode("utf-8")
            if not isinstance(label, str):
                if label_names is None:
                    raise ValueError(
                        f"{name}[{i}] holds {label!r}; pass label strings or "
                        "give label_names to map integer ids"
                    )
                index = int(label)
                if not 0 <= index < len(label_names):
                    raise ValueError(
                        f"{name}[{i}] holds label id {index}, outside the "
                        f"{len(label_names)} label_names"
                    )
                label = label_names[index]
            row.append(label)
        sentences.append(row)
    if not sentences:
        raise ValueError(f"{name} is empty: a metric needs at least one sentence")
    return sentences


def _check_scheme(sentences, name, scheme):
    allowed = _PREFIXES[scheme]
    for i, sentence in enumerate(sentences):
        for j, label in enumerate(sentence):
            if label == "O":
                continue
            if len(label) < 3 or label[1] != "-" or label[0] not in allowed:
                raise ValueError(
                    f"{name}[{i}][{j}] = {label!r} is not a {scheme} label "
                    f"(expected 'O' or one of {', '.join(p + '-TYPE' for p in allowed)})"
                )


def _prepare(labels, predictions, scheme, mode, label_names):
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "conlleval" and scheme not in _CONLLEVAL_SCHEMES:
        raise ValueError(
            f"scheme {scheme} needs mode='strict'; conlleval mode reads "
            f"{', '.join(_CONLLEVAL_SCHEMES)}"
        )
    labels = _as_sentences(labels, "labels", label_names)
    predictions = _as_sentences(predictions, "predictions", label_names)
    if len(labels) != len(predictions):
        raise ValueError(
            f"labels and predictions differ in length: {len(labels)} label "
            f"sentences, {len(predictions)} prediction sentences"
        )
    for i, (gold, pred) in enumerate(zip(labels, predictions)):
        if len(gold) != len(pred):
            raise ValueError(
                f"sentence {i}: {len(gold)} labels but {len(pred)} predictions"
            )
    if sum(len(s) for s in labels) == 0:
        raise ValueError("labels hold no token at all: every sentence is empty")
    _check_scheme(labels, "labels", scheme)
    _check_scheme(predictions, "predictions", scheme)
    return labels, predictions


def _prfs(labels, predictions, scheme, mode, average):
    if mode == "strict":
        from seqeval import scheme as seqeval_schemes
        from seqeval.metrics.v1 import precision_recall_fscore_support

        return precision_recall_fscore_support(
            labels, predictions, average=average, zero_division=0,
            scheme=getattr(seqeval_schemes, scheme),
        )
    from seqeval.metrics.sequence_labeling import precision_recall_fscore_support

    return precision_recall_fscore_support(
        labels, predictions, average=average, zero_division=0
    )


def entity_types(labels, predictions, scheme="IOB2", mode="conlleval"):
    """Sorted entity types found in labels or predictions (the report's keys)."""
    if mode == "strict":
        from seqeval import scheme as seqeval_schemes
        from seqeval.metrics.v1 import unique_labels

        return unique_labels(labels, predictions, getattr(seqeval_schemes, scheme))
    from seqeval.metrics.sequence_labeling import get_entities

    return sorted({t for t, _, _ in get_entities(labels)}
                  | {t for t, _, _ in get_entities(predictions)})


def tagging_metrics(labels, predictions, scheme="IOB2", mode="conlleval",
                    label_names=None):
    """Entity precision/recall/F1 (micro over entities), token accuracy, per type.

    Returns:
        {"precision", "recall", "f1": micro-averaged entity scores,
         "accuracy": fraction of tokens labelled exactly right,
         "num_entities": gold entity count,
         "per_type": {TYPE: {"precision", "recall", "f1", "support"}}}
        where "support" is the gold entity count of that type.
    """
    labels, predictions = _prepare(labels, predictions, scheme, mode, label_names)
    precision, recall, f1, _ = _prfs(labels, predictions, scheme, mode, "micro")
    per_p, per_r, per_f, per_s = _prfs(labels, predictions, scheme, mode, None)
    types = entity_types(labels, predictions, scheme, mode)
    per_type = {
        name: {
            "precision": float(p), "recall": float(r), "f1": float(f),
            "support": int(s),
        }
        for name, p, r, f, s in zip(types, per_p, per_r, per_f, per_s)
    }
    gold = np.array([x for s in labels for x in s], dtype=object)
    pred = np.array([x for s in predictions for x in s], dtype=object)
    return {
        "precision": float(np.asarray(precision).ravel()[0]),
        "recall": float(np.asarray(recall).ravel()[0]),
        "f1": float(np.asarray(f1).ravel()[0]),
        "accuracy": float(np.mean(gold == pred)),
        "num_entities": int(sum(v["support"] for v in per_type.values())),
        "per_type": per_type,
    }


def entity_f1(labels, predictions, scheme="IOB2", mode="conlleval", label_names=None):
    """Micro-averaged entity F1 alone (see `tagging_metrics`)."""
    return tagging_metrics(labels, predictions, scheme, mode, label_names)["f1"]


def classification_report(labels, predictions, scheme="IOB2", mode="conlleval",
                          label_names=None, digits=4):
    """seqeval's text report (per type + averages) for logs."""
    labels, predictions = _prepare(labels, predictions, scheme, mode, label_names)
    if mode == "strict":
        from seqeval import scheme as seqeval_schemes
        from seqeval.metrics import classification_report as report

        return report(labels, predictions, digits=digits, mode="strict",
                      scheme=getattr(seqeval_schemes, scheme), zero_division=0)
    from seqeval.metrics import classification_report as report

    return report(labels, predictions, digits=digits, zero_division=0)
