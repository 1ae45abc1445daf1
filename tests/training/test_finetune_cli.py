"""`kerasbert finetune` / `evaluate` / `create-finetuning-data` end to end on
small local files: outputs, learning past the majority baseline, cached
features giving the same run as raw text, and bad input."""

import csv
import json
import os
import random

import numpy as np
import pytest

import pretrain_data as pd
from reliability.console import KERASBERT
from reliability.console import kerasbert
from reliability.console import ok
from kerasbert.cli import main
from kerasbert.testing.files import write_csv
from kerasbert.testing.files import write_jsonl

from slow_marks import slow_covered_by

ANIMALS = ("the cat", "a dog", "the small bird")


def write_classification(path, n, seed):
    """label = whether the subject is an animal (learnable from one word)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        subject = rng.choice(pd.SUBJECTS)
        text = f"{subject} {rng.choice(pd.VERBS)} {rng.choice(pd.OBJECTS)} {rng.choice(pd.ENDINGS)}"
        rows.append([text, "animal" if subject in ANIMALS else "person"])
    return write_csv(path, ["sentence", "label"], rows)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A vocabulary, a tiny saved backbone and train/validation CSVs."""
    import keras

    from kerasbert.models import BertBackbone

    root = tmp_path_factory.mktemp("finetune")
    vocab, _ = pd.make_data(str(root))
    size = len(open(vocab, encoding="utf-8").read().splitlines())
    backbone = BertBackbone(vocabulary_size=size, num_layers=1, num_heads=2, hidden_dim=32,
                            intermediate_dim=64, max_sequence_length=64)
    path = str(root / "backbone.keras")
    backbone.save(path)
    keras.backend.clear_session()
    return {"vocab": vocab, "backbone": path, "root": root,
            "train": write_classification(root / "train.csv", 240, 0),
            "valid": write_classification(root / "valid.csv", 80, 1)}


def finetune_args(setup, out, *extra):
    return ["finetune", "--backbone", setup["backbone"], "--vocab", setup["vocab"],
            "--output-dir", str(out), "--epochs", "4", "--batch-size", "16",
            "--learning-rate", "3e-3", "--max-seq-length", "24", "--no-progress", *extra]


def test_classification_learns_and_writes_outputs(setup, tmp_path):
    out = tmp_path / "ft"
    args = finetune_args(setup, out, "--task", f"csv:{setup['train']}",
                         "--validation", setup["valid"])
    args[args.index("--epochs") + 1] = "8"  # 120 steps: a 1-layer model from scratch
    assert main(args) == 0
    for name in ("model.keras", "config.json", "vocab.txt", "metrics.json",
                 "training_curve.png", "confusion_matrix.png"):
        assert os.path.getsize(out / name) > 0, name
    config = json.load(open(out / "config.json"))
    assert config["task_type"] == "classification"
    assert config["label_names"] == ["animal", "person"]
    assert config["max_seq_length"] == 24
    metrics = json.load(open(out / "metrics.json"))["validation"]
    print(f"finetune CLI accuracy {metrics['accuracy']:.3f} "
          f"(baseline {metrics['majority_baseline_accuracy']:.3f})")
    assert metrics["accuracy"] >= 0.9 > metrics["majority_baseline_accuracy"] + 0.2, metrics
    assert {"f1", "matthews_corrcoef"} <= set(metrics)

    # evaluate reloads model + vocab from the directory alone. Same batch
    # size as finetune's validation: the same computation, so the same
    # argmax decisions even at near ties (another batch shape may change
    # the matmuls' summation order, and with it the last bits).
    assert main(["evaluate", "--model", str(out), "--split", setup["valid"],
                 "--batch-size", "16"]) == 0
    evaluation = json.load(open(out / "evaluation.json"))
    assert evaluation["split"] == setup["valid"]
    assert evaluation["metrics"]["accuracy"] == metrics["accuracy"]


def test_a_run_made_from_relative_paths_travels(setup, tmp_path, monkeypatch, capsys):
    """A run fine-tuned in work/ from relative paths, its progress going to
    a pipe (Keras' one line per epoch, no progress bar redrawn with `\\r`),
    is used from elsewhere/ by `evaluate` and `export` in fresh console-script
    processes: evaluate reads the run's own validation file, and export.json
    names the task file by name and hash, never by a path of this machine."""
    import hashlib
    import re
    import shutil

    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    shutil.copy(setup["train"], work / "train.csv")
    shutil.copy(setup["valid"], work / "valid.csv")
    monkeypatch.chdir(work)
    args = finetune_args(setup, "ft", "--task", "csv:train.csv", "--validation", "valid.csv")
    args.remove("--no-progress")
    args[args.index("--epochs") + 1] = "2"
    capsys.readouterr()
    assert main(args) == 0
    log = capsys.readouterr().out
    assert "\r" not in log and "\b" not in log
    assert len([line for line in log.splitlines() if re.match(r"\d+/\d+ - \d+s", line)]) == 2, log

    # evaluate and export as the installed console script, from elsewhere/.
    evaluated = ok(kerasbert("evaluate", "--model", "../work/ft", "--batch-size", "16",
                             cwd=elsewhere))
    assert "its own validation data" in evaluated
    metrics = json.load(open(work / "ft" / "metrics.json"))["validation"]
    evaluation = json.load(open(work / "ft" / "evaluation.json"))["metrics"]
    assert evaluation["accuracy"] == pytest.approx(metrics["accuracy"], abs=1e-6)

    ok(kerasbert("export", "--model", "../work/ft", "--output", "serving", cwd=elsewhere))
    text = (elsewhere / "serving" / "1" / "assets.extra" / "export.json").read_text()
    assert str(tmp_path) not in text, text
    info = json.loads(text)
    assert info["task"] == "csv:train.csv"
    digest = hashlib.sha256((work / "train.csv").read_bytes()).hexdigest()
    assert info["source"]["task_file"] == {"name": "train.csv", "sha256": digest}


@pytest.mark.parametrize("kind", [
    "classification",
    # 17 s: QA's several windows per question cached and raw; the default suite caches
    # classification features and fine-tunes QA from raw text.
    pytest.param("qa", id="qa", marks=slow_covered_by(
        "tests/training/test_finetune_cli.py::test_cached_features_train_like_raw_text",
        "tests/training/test_finetune_cli.py::test_every_task_type_runs_end_to_end")),
])
def test_cached_features_train_like_raw_text(setup, tmp_path, capsys, kind):
    if kind == "qa":  # several windows per question: they are shuffled, not the questions
        task = f"squad_json:{squad_json(tmp_path / 'train.json', 40, 0)}"
        length = ["--max-seq-length", "16", "--max-query-length", "6", "--doc-stride", "4"]
    else:
        task, length = f"csv:{setup['train']}", ["--max-seq-length", "24"]
    features = tmp_path / "features"
    assert main(["create-finetuning-data", "--task", task, "--vocab", setup["vocab"], *length,
                 "--splits", "train", "--output-dir", str(features)]) == 0
    if kind == "qa":
        assert json.load(open(features / "metadata.json"))["splits"]["train"]["num_features"] > 40
    raw, cached = tmp_path / "raw", tmp_path / "cached"
    for out, data in ((raw, ["--task", task, *length[2:]]), (cached, ["--features", str(features)])):
        args = finetune_args(setup, out, *data, "--epochs", "2")
        args[args.index("--max-seq-length") + 1] = length[1]
        assert main(args) == 0
    raw_history = json.load(open(raw / "metrics.json"))["history"]
    cached_history = json.load(open(cached / "metrics.json"))["history"]
    # One path: `finetune` fits raw text through the model's preprocessor, and the
    # same seed shuffles the examples as the features' order: the same run.
    assert cached_history["loss"] == raw_history["loss"]


def test_padding_and_precision_flags(setup, tmp_path):
    """--padding max_length trains as the default (each batch cut to its
    longest row) does; --precision mixed_bfloat16 with
    --bucket-by-length fine-tunes a bfloat16 model that config.json and
    model.keras record."""
    import keras

    histories = {}
    for name, flags in (("fixed", ["--padding", "max_length"]), ("longest", []),
                        ("bf16", ["--precision", "mixed_bfloat16", "--bucket-by-length"])):
        out = tmp_path / name
        args = finetune_args(setup, out, "--task", f"csv:{setup['train']}", "--epochs", "2",
                             *flags)
        args[args.index("--max-seq-length") + 1] = "48"
        assert main(args) == 0
        histories[name] = json.load(open(out / "metrics.json"))["history"]["loss"]
        config = json.load(open(out / "config.json"))["finetune"]
        assert (config["padding"], config["precision"]) == {
            "fixed": ("max_length", "float32"), "longest": ("longest", "float32"),
            "bf16": ("longest", "mixed_bfloat16")}[name]
    # Dropout (0.1 in this backbone) draws its masks per tensor shape, so the
    # two runs differ by dropout's noise only (exact without dropout:
    # tests/tasks/test_length_aware_tasks.py).
    np.testing.assert_allclose(histories["longest"], histories["fixed"], atol=3e-3)
    assert np.isfinite(histories["bf16"]).all()
    model = keras.saving.load_model(str(tmp_path / "bf16" / "model.keras"), compile=False)
    assert model.dtype_policy.name == "mixed_bfloat16"
    assert model.preprocessor.bucket_by_length
    # The bfloat16 run exports from another process and folder, in bfloat16.
    ok(kerasbert("export", "--model", "../bf16", "--output", "served", "--precision", "bfloat16",
                 cwd=tmp_path / "fixed"))
    info = json.loads((tmp_path / "fixed" / "served" / "1" / "assets.extra" / "export.json")
                      .read_text())
    assert info["graph"]["precision"] == "bfloat16"


@pytest.mark.parametrize("problem, expected", [
    ("unknown_task", "Unknown GLUE task 'glue/colaa'"),
    ("label", "label"),
    ("positions", "max_seq_length"),
    ("both_backbones", "not allowed with argument --backbone"),
])
def test_bad_input_exits_2(setup, tmp_path, capsys, problem, expected):
    args = finetune_args(setup, tmp_path / "ft", "--task", f"csv:{setup['train']}")
    if problem == "unknown_task":
        args[args.index("--task") + 1] = "glue/colaa"
    elif problem == "label":
        bad = tmp_path / "bad.csv"
        bad.write_text("sentence,label\nthe cat sees the river,animal\na dog calls,robot\n",
                       encoding="utf-8")
        args += ["--validation", str(bad)]
    elif problem == "positions":
        args[args.index("--max-seq-length") + 1] = "128"
    elif problem == "both_backbones":
        args += ["--preset", "bert_tiny"]
    if problem == "both_backbones":  # argparse rejects it: SystemExit(2)
        with pytest.raises(SystemExit) as exit_info:
            main(args)
        assert exit_info.value.code == 2
    else:
        assert main(args) == 2
    err = capsys.readouterr().err
    assert expected.lower() in err.lower(), err
    assert not (tmp_path / "ft" / "model.keras").exists()


def tagging_records(n, seed):
    """Animals are B-ANIMAL (+ I-ANIMAL), everything else O."""
    rng = random.Random(seed)
    records = []
    for _ in range(n):
        words, labels = [], []
        for phrase in (rng.choice(pd.SUBJECTS), rng.choice(pd.VERBS), rng.choice(pd.OBJECTS)):
            tokens = phrase.split()
            animal = phrase in ANIMALS
            for i, token in enumerate(tokens):
                words.append(token)
                labels.append("O" if not animal or token in ("the", "a") else
                              ("B-ANIMAL" if labels[-1:] != ["B-ANIMAL"] else "I-ANIMAL"))
        records.append({"tokens": words, "labels": labels})
    return records


def squad_json(path, n, seed):
    """Questions "who VERB ..." answered by the subject of a context sentence."""
    rng = random.Random(seed)
    paragraphs = []
    for i in range(n):
        subject, verb, obj = rng.choice(pd.SUBJECTS), rng.choice(pd.VERBS), rng.choice(pd.OBJECTS)
        context = f"{rng.choice(pd.ENDINGS)} {subject} {verb} {obj} ."
        paragraphs.append({"context": context, "qas": [{
            "id": f"q{i}", "question": f"who {verb} {obj} ?",
            "answers": [{"text": subject, "answer_start": context.index(subject)}]}]})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}, f)
    return str(path)


def swag_csv(path, n, seed):
    """The right ending repeats the start phrase's object."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        objects = rng.sample(pd.OBJECTS, 4)
        label = rng.randrange(4)
        subject = rng.choice(pd.SUBJECTS)
        sent1 = f"{subject} {rng.choice(pd.VERBS)} {objects[label]} ."
        rows.append(["v", i, sent1, sent1, subject, "gold",
                     *[f"{o} {rng.choice(pd.ENDINGS)}" for o in objects], label])
    return write_csv(path, ["video-id", "fold-ind", "startphrase", "sent1", "sent2",
                            "gold-source", "ending0", "ending1", "ending2", "ending3",
                            "label"], rows)


@pytest.mark.parametrize("kind", [
    # 18 s: tagging through finetune -> evaluate; the default suite fine-tunes the other
    # types this way, reads tagging files through the script and trains a tagger.
    pytest.param("tagging", id="tagging", marks=slow_covered_by(
        "tests/training/test_finetune_cli.py::test_every_task_type_runs_end_to_end",
        "tests/data/finetuning/test_ft_create_command.py::test_jsonl_tagging_through_the_script",
        "tests/tasks/test_token_classifier.py::test_learns_rule_labelled_entities",
        "tests/serving/test_export.py::test_tagging_words_labels_and_entities")),
    "qa",
    "multiple_choice",
])
def test_every_task_type_runs_end_to_end(setup, tmp_path, kind):
    """Each task type through finetune -> metrics.json -> evaluate."""
    if kind == "tagging":
        train = write_jsonl(tmp_path / "train.jsonl", tagging_records(60, 0))
        valid = write_jsonl(tmp_path / "valid.jsonl", tagging_records(20, 1))
        task, keys = f"jsonl:{train}", {"f1", "precision", "recall"}
    elif kind == "qa":
        train, valid = squad_json(tmp_path / "train.json", 60, 0), squad_json(tmp_path / "v.json", 20, 1)
        task, keys = f"squad_json:{train}", {"exact_match", "f1"}
    else:
        train, valid = swag_csv(tmp_path / "train.csv", 60, 0), swag_csv(tmp_path / "v.csv", 20, 1)
        task, keys = f"swag:{train}", {"accuracy"}
    out = tmp_path / "ft"
    args = finetune_args(setup, out, "--task", task, "--validation", valid)
    args[args.index("--epochs") + 1] = "1"
    if kind == "qa":
        args[args.index("--max-seq-length") + 1] = "48"
        args += ["--max-query-length", "12", "--doc-stride", "16"]
    assert main(args) == 0
    metrics = json.load(open(out / "metrics.json"))["validation"]
    assert keys <= set(metrics), metrics
    assert json.load(open(out / "config.json"))["task_type"] == kind
    # Same batch size as finetune's validation (see above): same decisions.
    assert main(["evaluate", "--model", str(out), "--split", valid, "--batch-size", "16"]) == 0
    evaluation = json.load(open(out / "evaluation.json"))["metrics"]
    for key in keys:
        assert evaluation[key] == pytest.approx(metrics[key])


@pytest.mark.parametrize("task, keys", [
    ("glue/cola", {"matthews_corrcoef", "accuracy"}),
    ("glue/mrpc", {"accuracy", "f1"}),
    ("glue/stsb", {"pearson", "spearman", "pearson_spearman_avg"}),
])
def test_glue_tasks_through_tfds(setup, tmp_path, task, keys):
    """GLUE from TFDS (mock data, offline): the task's own metrics."""
    import tensorflow_datasets as tfds

    out = tmp_path / "ft"
    args = finetune_args(setup, out, "--task", task)
    args[args.index("--epochs") + 1] = "1"
    with tfds.testing.mock_data(num_examples=16):
        assert main(args) == 0
    metrics = json.load(open(out / "metrics.json"))["validation"]
    assert keys <= set(metrics), metrics
    config = json.load(open(out / "config.json"))
    assert config["task_type"] == {"glue/cola": "classification", "glue/mrpc": "pair",
                                   "glue/stsb": "regression"}[task]


# 19 s: a fresh process fine-tunes over 2 logical CPUs (MirroredStrategy); the default
# suite fine-tunes multi-replica through two multi_worker console scripts.
@slow_covered_by("tests/training/test_finetune_cli.py::test_multi_worker_strategy_two_console_script_processes",
                 "tests/data/test_reader_interop.py::test_mirrored_strategy_per_replica_batches",
                 "tests/training/test_strategy_refusals.py::test_mirrored_needs_gpus_or_logical_cpus")
def test_mirrored_strategy_on_two_logical_cpus(setup, tmp_path):
    """`--strategy mirrored` (model.fit over 2 replicas) fine-tunes too."""
    out = tmp_path / "ft"
    args = finetune_args(setup, out, "--task", f"csv:{setup['train']}", "--validation",
                         setup["valid"], "--strategy", "mirrored", "--logical-cpus", "2")
    args[args.index("--epochs") + 1] = "1"
    result = pd.run_cli(args)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.load(open(out / "metrics.json"))
    assert np.isfinite(metrics["history"]["loss"][0])
    assert 0.0 <= metrics["validation"]["accuracy"] <= 1.0


def test_multi_worker_strategy_two_console_script_processes(setup, tmp_path):
    """`kerasbert finetune --strategy multi_worker`: two installed console
    scripts with TF_CONFIG train one model (model.fit over
    MultiWorkerMirroredStrategy); only the chief writes --output-dir."""
    from kerasbert.testing.workers import run_workers

    out = tmp_path / "ft"
    train = write_classification(tmp_path / "train.csv", 64, 2)
    valid = write_classification(tmp_path / "valid.csv", 16, 3)
    args = finetune_args(setup, out, "--task", f"csv:{train}", "--validation", valid,
                         "--strategy", "multi_worker")
    args[args.index("--epochs") + 1] = "2"
    scratch = tmp_path / "tmp"  # where the other worker writes its copy
    scratch.mkdir()
    outputs = run_workers([KERASBERT, *args], tmp_path,
                          env={"PYTHONPATH": pd.REPO, "TMPDIR": str(scratch)})
    assert "fine-tuned a classification model" in outputs[0]
    assert "fine-tuned" not in outputs[1]  # the other worker stays quiet
    assert sorted(os.listdir(out)) == sorted([
        "config.json", "confusion_matrix.png", "metrics.json", "model.keras",
        "training_curve.png", "vocab.txt"])
    assert not [p for p in scratch.iterdir() if p.name.startswith("kerasbert-finetune")]
    config = json.load(open(out / "config.json"))
    assert config["finetune"]["strategy"] == "multi_worker"
    metrics = json.load(open(out / "metrics.json"))
    assert len(metrics["history"]["loss"]) == 2 and np.isfinite(metrics["history"]["loss"]).all()
    assert 0.0 <= metrics["validation"]["accuracy"] <= 1.0


def test_albert_sentencepiece_finetune_export_predict(setup, tmp_path, capsys):
    """`--vocab` a SentencePiece .model: finetune copies it into FT,
    `export` puts it in the SavedModel's assets, `predict` serves it."""
    import keras

    from kerasbert.models import AlbertBackbone
    from kerasbert.text import train_sentencepiece

    corpus = tmp_path / "corpus.txt"
    with open(setup["train"], encoding="utf-8") as f:
        corpus.write_text("\n".join(row["sentence"] for row in csv.DictReader(f)) + "\n",
                          encoding="utf-8")
    spm, _ = train_sentencepiece([str(corpus)], 48, str(tmp_path / "albert"), num_threads=1,
                                 character_coverage=1.0)
    backbone = AlbertBackbone(vocabulary_size=48, num_layers=1, num_heads=2, hidden_dim=16,
                              intermediate_dim=32, embedding_dim=8, max_sequence_length=32)
    backbone.save(str(tmp_path / "albert.keras"))
    keras.backend.clear_session()
    out = tmp_path / "ft"
    args = finetune_args(setup, out, "--task", f"csv:{setup['train']}")
    args[args.index("--backbone") + 1] = str(tmp_path / "albert.keras")
    args[args.index("--vocab") + 1] = spm
    args[args.index("--epochs") + 1] = "1"
    assert main(args) == 0
    config = json.load(open(out / "config.json"))
    described = {k: config["tokenizer"][k] for k in ("type", "files", "lower_case",
                                                     "special_tokens_in_strings")}
    assert described == {"type": "sentencepiece", "files": ["sentencepiece.model"],
                         "lower_case": True, "special_tokens_in_strings": False}
    assert (out / "sentencepiece.model").read_bytes() == open(spm, "rb").read()

    exported = tmp_path / "export"
    assert main(["export", "--model", str(out), "--output", str(exported)]) == 0
    assert os.listdir(exported / "1" / "assets") == ["sentencepiece.model"]
    capsys.readouterr()
    assert main(["predict", "--saved-model", str(exported / "1"), "--text", "the cat sees"]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["label"] in ("animal", "person") and len(row["probabilities"]) == 2
