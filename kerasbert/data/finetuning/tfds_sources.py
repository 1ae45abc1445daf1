"""Task examples from TensorFlow Datasets: GLUE, SQuAD v1.1/v2.0, CoNLL-2003,
and the WMT translation sets (wmt14_translate, ...) as text2text tasks.

Field names are those of the TFDS builders (tensorflow_datasets/text/glue.py,
datasets/squad, text/conll2003); label names come from the builders' info.
Nothing here downloads by itself: `tfds.load` reads prepared data from the
TFDS data dir (or downloads it when the user's machine may), and tests run
under `tfds.testing.mock_data`.
"""

from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.data.finetuning.examples import TaskData, TaskDataError

# GLUE config -> (task type, text_a field, text_b field or None).
GLUE_TASKS = {
    "cola": ("classification", "sentence", None),
    "sst2": ("classification", "sentence", None),
    "mrpc": ("pair", "sentence1", "sentence2"),
    "stsb": ("regression", "sentence1", "sentence2"),
    "qqp": ("pair", "question1", "question2"),
    "mnli": ("pair", "premise", "hypothesis"),
    "qnli": ("pair", "question", "sentence"),
    "rte": ("pair", "sentence1", "sentence2"),
    "wnli": ("pair", "sentence1", "sentence2"),
}

SQUAD_TASKS = {
    "squad": "squad/v1.1",
    "squad/v1.1": "squad/v1.1",
    "squad_v1": "squad/v1.1",
    "squad_v2": "squad/v2.0",
    "squad/v2.0": "squad/v2.0",
}

# The WMT builders of TFDS: configs "xx-en", features {"xx": text, "en": text}.
TRANSLATION_DATASETS = tuple(f"wmt{year}_translate" for year in range(13, 20))

TFDS_TASKS = (tuple(f"glue/{name}" for name in GLUE_TASKS) + ("squad", "squad_v2", "conll2003")
              + ("wmt14_translate/SRC-TGT",))

# Friendly split names -> each builder's own.
_SPLIT_ALIASES = {
    "glue/mnli": {"validation": "validation_matched", "dev": "validation_matched",
                  "test": "test_matched"},
    "glue": {"dev": "validation"},
    "squad": {"dev": "validation"},
    "conll2003": {"validation": "dev"},
    "translate": {"dev": "validation"},
}


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _load(name, split, spec):
    import tensorflow_datasets as tfds

    try:
        dataset = tfds.load(name, split=split, shuffle_files=False)
        info = tfds.builder(name).info
    except Exception as err:  # DatasetNotFoundError, unknown split, no data.
        raise TaskDataError(f"Cannot load TFDS dataset {name!r} split {split!r} "
                            f"(task {spec!r}): {err}") from None
    return tfds.as_numpy(dataset), info


def _is_test_split(split):
    return split.split("[")[0].startswith("test")


def load_glue(config, split="train", require_labels=True):
    """GLUE examples (classification, pair or regression).

    Test splits have no labels (label -1): with `require_labels` (training,
    evaluation) they are refused; without, labels are None (prediction).
    """
    spec = f"glue/{config}"
    if config not in GLUE_TASKS:
        raise TaskDataError(
            f"Unknown GLUE task {spec!r}; valid: {', '.join('glue/' + n for n in GLUE_TASKS)}."
        )
    split = _SPLIT_ALIASES.get(spec, {}).get(split, _SPLIT_ALIASES["glue"].get(split, split))
    if require_labels and _is_test_split(split):
        raise TaskDataError(
            f"{spec} {split} split has no labels (label -1); use it only for prediction."
        )
    task_type, field_a, field_b = GLUE_TASKS[config]
    records, info = _load(spec, split, spec)
    label_names = None
    float_labels = task_format(task_type).float_labels
    if not float_labels:
        label_names = list(info.features["label"].names)
    examples = []
    has_labels = True
    for i, record in enumerate(records):
        label = record["label"]
        if float_labels:
            label = float(label)
        else:
            label = int(label)
            if label == -1:
                if require_labels:
                    raise TaskDataError(
                        f"{spec} {split} split has no labels (label -1, example {i}); "
                        "use it only for prediction."
                    )
                label, has_labels = None, False
        if not require_labels and _is_test_split(split):
            label, has_labels = None, False
        example = {"text_a": _text(record[field_a]), "label": label}
        if field_b:
            example["text_b"] = _text(record[field_b])
        examples.append(example)
    return TaskData(examples, task_type, label_names, spec, split, has_labels)


def load_squad(spec="squad", split="train"):
    """SQuAD v1.1 ("squad") or v2.0 ("squad_v2") examples (task type "qa").

    v2.0 marks unanswerable questions with `is_impossible` (and no answers;
    its `plausible_answers` are not used for training, as in the original
    BERT run_squad.py)."""
    if spec not in SQUAD_TASKS:
        raise TaskDataError(f"Unknown SQuAD task {spec!r}; valid: squad, squad_v2.")
    name = SQUAD_TASKS[spec]
    split = _SPLIT_ALIASES["squad"].get(split, split)
    records, _ = _load(name, split, spec)
    examples = []
    for record in records:
        impossible = bool(record.get("is_impossible", False))
        answers = []
        if not impossible:
            texts = record["answers"]["text"]
            starts = record["answers"]["answer_start"]
            answers = [{"text": _text(t), "answer_start": int(s)} for t, s in zip(texts, starts)]
        examples.append({
            "id": _text(record["id"]),
            "question": _text(record["question"]),
            "context": _text(record["context"]),
            "answers": answers,
            "is_impossible": impossible,
        })
    return TaskData(examples, "qa", None, spec, split)


def load_conll2003(split="train"):
    """CoNLL-2003 NER examples (task type "tagging"); labels are the builder's
    `ner` tag names (O, B-PER, I-PER, ...). Splits: train, dev
    ("validation" works too), test."""
    split = _SPLIT_ALIASES["conll2003"].get(split, split)
    records, info = _load("conll2003", split, "conll2003")
    label_names = list(info.features["ner"].feature.names)
    examples = []
    for i, record in enumerate(records):
        tokens = [_text(t) for t in record["tokens"]]
        labels = [int(t) for t in record["ner"]]
        if len(tokens) != len(labels):
            raise TaskDataError(
                f"conll2003 {split} example {i}: {len(tokens)} tokens but "
                f"{len(labels)} ner tags."
            )
        examples.append({"tokens": tokens, "labels": labels})
    return TaskData(examples, "tagging", label_names, "conll2003", split)


def is_translation(spec):
    """Whether `spec` names a WMT translation set ("wmt14_translate/de-en")."""
    return spec.split("/")[0] in TRANSLATION_DATASETS


def translation_direction(spec, configs):
    """(TFDS name "wmt14_translate/de-en", source language, target language)
    of a spec "wmt14_translate/SRC-TGT".

    The spec names the direction, source first; the TFDS config is the
    language pair in either order (TFDS has "de-en", so "wmt14_translate/
    de-en" translates German to English and "wmt14_translate/en-de" English
    to German, both from the same data).

    Args:
        configs: the builder's config names ("cs-en", "de-en", ...).
    """
    name, _, pair = spec.partition("/")
    languages = pair.split("-")
    if len(languages) != 2 or not all(languages) or languages[0] == languages[1]:
        raise TaskDataError(f"Task {spec!r}: give the direction as {name}/SRC-TGT, e.g. "
                            f"{name}/de-en (language pairs: {', '.join(configs)}).")
    source, target = languages
    for config in (f"{source}-{target}", f"{target}-{source}"):
        if config in configs:
            return f"{name}/{config}", source, target
    raise TaskDataError(f"Task {spec!r}: {name} has no {source}-{target} pair; its language "
                        f"pairs are {', '.join(configs)} (either direction).")


def load_translation(spec, split="train", require_labels=True):
    """WMT sentence pairs as text2text examples {"source", "target"}; the
    spec's direction picks which language is the source
    (`translation_direction`). Splits: train, validation ("dev"), test."""
    import tensorflow_datasets as tfds

    name = spec.split("/")[0]
    try:
        configs = [config.name for config in tfds.builder_cls(name).BUILDER_CONFIGS]
    except Exception as err:  # an unknown builder
        raise TaskDataError(f"Cannot find TFDS dataset {name!r} (task {spec!r}): {err}") from None
    tfds_name, source, target = translation_direction(spec, configs)
    split = _SPLIT_ALIASES["translate"].get(split, split)
    records, _ = _load(tfds_name, split, spec)
    examples = [{"source": _text(record[source]), "target": _text(record[target])}
                for record in records]
    if not examples:
        raise TaskDataError(f"{spec} {split} split has no examples.")
    return TaskData(examples, "text2text", None, spec, split, True)
