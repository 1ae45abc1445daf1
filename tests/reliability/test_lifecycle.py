"""The life cycle of docs/reliability.md as a user runs it: one installed
`kerasbert` command per fresh process, from a working directory that is
neither the data's nor the repository, with relative paths:

    vocab -> create-pretraining-data -> pretrain -> pretrain --resume
      -> finetune (every task type, from the pretrained backbone)
      -> evaluate -> export -> serve (a process with only tensorflow and
         tensorflow_text)

Every step is a separate process, so state that only lives inside one
interpreter (registered classes, imported modules, cwd) cannot hide a bug,
as it did when `export` of a fine-tuned model failed in every new process.
"""

import csv
import hashlib
import json
import os
import re
import shutil
import random
import subprocess
import sys
import textwrap

import pytest

from reliability.console import TINY_BERT, kerasbert, ok, one_line_error, tree
from slow_marks import slow_covered_by

SUBJECTS = ("the cat", "a dog", "the small bird", "the old man", "my sister", "our teacher")
ANIMALS = SUBJECTS[:3]
VERBS = ("sees", "likes", "finds", "paints", "follows", "calls")
OBJECTS = ("the red house", "a green tree", "the river", "a blue car", "the garden")
TASK_TYPES = ("classification", "pair", "regression", "tagging", "qa", "multiple_choice")


def _sentence(rng):
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"


def _write_corpus(path, rng):
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(40):
            subject = rng.choice(SUBJECTS)
            for _ in range(rng.randint(3, 6)):
                f.write(f"{subject.capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)} .\n")
            f.write("\n")


def _write_csv(path, header, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def _write_task_files(data, rng, n=24):
    """One small training file per task type; returns {type: task spec}."""
    rows = [_sentence(rng) for _ in range(n)]
    animal = [next(s for s in SUBJECTS if r.startswith(s)) in ANIMALS for r in rows]
    _write_csv(data / "classification.csv", ["sentence", "label"],
               [(r, "animal" if a else "person") for r, a in zip(rows, animal)])
    _write_csv(data / "pair.csv", ["sentence1", "sentence2", "label"],
               [(r, _sentence(rng), int(a)) for r, a in zip(rows, animal)])
    _write_csv(data / "regression.csv", ["text", "score"],
               [(r, f"{float(a) + 0.25:.2f}") for r, a in zip(rows, animal)])
    with open(data / "tagging.conll", "w", encoding="utf-8") as f:
        for r in rows:
            for i, word in enumerate(r.split()):
                tag = "B-ANI" if i == 1 and word in ("cat", "dog", "bird") else "O"
                f.write(f"{word} {tag}\n")
            f.write("\n")
    paragraphs = []
    for i, r in enumerate(rows[:12]):
        subject = next(s for s in SUBJECTS if r.startswith(s))
        paragraphs.append({"context": r + " .", "qas": [{
            "id": f"q{i}", "question": f"who {r.split()[len(subject.split())]} ?",
            "answers": [{"text": subject, "answer_start": 0}]}]})
    with open(data / "qa.json", "w", encoding="utf-8") as f:
        json.dump({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}, f)
    with open(data / "multiple_choice.jsonl", "w", encoding="utf-8") as f:
        for r in rows:
            subject = next(s for s in SUBJECTS if r.startswith(s))
            choices = [subject + " runs", "the river sees", "a blue car calls"]
            f.write(json.dumps({"context": r, "choices": choices, "label": 0}) + "\n")
    return {"classification": "csv:../data/classification.csv",
            "pair": "csv:../data/pair.csv",
            "regression": "csv:../data/regression.csv",
            "tagging": "conll:../data/tagging.conll",
            "qa": "squad_json:../data/qa.json",
            "multiple_choice": "jsonl:../data/multiple_choice.jsonl"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """data/ (inputs) and work/ (the user's shell, where outputs go)."""
    root = tmp_path_factory.mktemp("lifecycle")
    data, work = root / "data", root / "work"
    data.mkdir()
    work.mkdir()
    rng = random.Random(7)
    _write_corpus(data / "corpus.txt", rng)
    specs = _write_task_files(data, rng)
    return {"root": root, "data": data, "work": work, "specs": specs}


@pytest.fixture(scope="module")
def pretrained(world):
    """vocab -> create-pretraining-data -> pretrain (4 steps) -> pretrain
    --resume (to 6 steps), each in its own process."""
    work = world["work"]
    ok(kerasbert("vocab", "--input", "../data/corpus.txt", "--vocab-size", "120",
                 "--output", "out/vocab.txt", "--no-progress", cwd=work))
    ok(kerasbert("create-pretraining-data", "--input", "../data/corpus.txt",
                 "--vocab", "out/vocab.txt", "--output-dir", "out/shards",
                 "--max-seq-length", "32", "--max-predictions-per-seq", "5",
                 "--dupe-factor", "2", "--num-shards", "2", "--no-progress", cwd=work))
    common = ["pretrain", "--preset", "bert_tiny", "--vocab", "out/vocab.txt",
              "--data", "out/shards", "--output-dir", "out/run", "--batch-size", "8",
              "--learning-rate", "1e-3", "--warmup-steps", "1", "--checkpoint-every", "2",
              "--log-every", "1", "--no-progress", *TINY_BERT]
    ok(kerasbert(*common, "--steps", "4", cwd=work))
    ok(kerasbert(*common, "--steps", "6", "--resume", cwd=work))
    return work / "out"


# 53 s (the module's vocab -> data -> pretrain -> resume, four fresh processes); the
# default suite runs vocab and create-pretraining-data's script, create-pretraining-data
# and a SIGKILLed pretrain resumed as console scripts.
@slow_covered_by("tests/text/test_vocabulary.py::test_cli",
                 "tests/data/test_writer.py::test_cli_script_writes",
                 "tests/reliability/test_kills.py::test_kill_create_pretraining_data",
                 "tests/reliability/test_kills.py::test_kill_pretrain_then_resume")
def test_vocabulary_and_pretraining_data(pretrained):
    vocab = (pretrained / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert vocab[:1] == ["[PAD]"] and "[MASK]" in vocab and "cat" in vocab
    meta = json.loads((pretrained / "shards" / "metadata.json").read_text())
    assert meta["num_instances"] > 0 and len(meta["shards"]) == 2
    assert meta["vocab_size"] == len(vocab)


# Needs the module's run: --resume in a new process continues the history; the default
# suite resumes a SIGKILLed console run with each step logged once.
@slow_covered_by("tests/reliability/test_kills.py::test_kill_pretrain_then_resume",
                 "tests/training/test_pretrain_cli.py::test_run_writes_every_output")
def test_pretrain_resumes_in_a_new_process(pretrained):
    run = pretrained / "run"
    steps = [json.loads(line)["step"] for line in
             (run / "history.jsonl").read_text().splitlines() if line.strip()]
    # The resumed process continued after step 4 instead of starting over.
    assert steps == [1, 2, 3, 4, 5, 6], steps
    for name in ("backbone.keras", "pretrainer.keras", "config.json"):
        assert (run / name).stat().st_size > 0, name


@pytest.fixture(scope="module")
def finetuned(world, pretrained):
    """`finetune` of every task type from the pretrained backbone, each in a
    new process; returns {task type: FT dir relative to work/}. The
    classifier shows its progress (stdout is a pipe, as a log file):
    world["root"]/finetune.log keeps what it printed."""
    out = {}
    for task_type in TASK_TYPES:
        extra = {"regression": ["--task-type", "regression"],
                 "qa": ["--max-query-length", "8", "--doc-stride", "8"]}.get(task_type, [])
        spec = world["specs"][task_type]
        ft = f"out/ft-{task_type}"
        progress = [] if task_type == "classification" else ["--no-progress"]
        stdout = ok(kerasbert("finetune", "--task", spec, "--validation",
                              spec.partition(":")[2], *extra, "--backbone",
                              "out/run/backbone.keras", "--vocab", "out/vocab.txt",
                              "--output-dir", ft, "--epochs", "1", "--batch-size", "8",
                              "--learning-rate", "1e-3", "--max-seq-length", "32", *progress,
                              cwd=world["work"]))
        if task_type == "classification":
            (world["root"] / "finetune.log").write_text(stdout)
        out[task_type] = ft
    return out


# 123 s for the six fine-tunings (fresh processes, from the module's pretrained run) and
# 9-13 s per evaluate; the default suite fine-tunes in a fresh process and fine-tunes
# and evaluates every type in process.
@slow_covered_by("tests/training/test_finetune_cli.py::test_multi_worker_strategy_two_console_script_processes",
                 "tests/training/test_finetune_cli.py::test_classification_learns_and_writes_outputs",
                 "tests/training/test_finetune_cli.py::test_every_task_type_runs_end_to_end",
                 "tests/training/test_finetune_cli.py::test_glue_tasks_through_tfds")
@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_finetune_then_evaluate_in_new_processes(world, finetuned, task_type):
    work, ft = world["work"], finetuned[task_type]
    config = json.loads((work / ft / "config.json").read_text())
    assert config["task_type"] == task_type
    spec = world["specs"][task_type]
    stdout = ok(kerasbert("evaluate", "--model", ft, "--split", spec.partition(":")[2],
                          "--batch-size", "8", cwd=work))
    evaluation = json.loads((work / ft / "evaluation.json").read_text())
    assert evaluation["metrics"], stdout
    fine_tuned = json.loads((work / ft / "metrics.json").read_text())["validation"]
    # The same model on the same file in batches of the same size: the
    # reloaded model gives the metrics the fine-tuning process measured.
    for name, value in fine_tuned.items():
        if isinstance(value, float):
            assert evaluation["metrics"][name] == pytest.approx(value, abs=1e-3), name


@pytest.fixture(scope="module")
def exported(world, finetuned):
    out = {}
    for task_type, ft in finetuned.items():
        ok(kerasbert("export", "--model", ft, "--output", f"serving/{task_type}",
                     cwd=world["work"]))
        out[task_type] = world["work"] / "serving" / task_type / "1"
    return out


SERVE = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the tokenizer ops)

requests = {
    "classification": {"text": ["the cat sees the river", "my sister calls a blue car"]},
    "pair": {"text_a": ["the cat sees the river"], "text_b": ["a dog finds the garden"]},
    "regression": {"text": ["a dog likes the garden"]},
    "tagging": {"text": ["the cat follows the old man"]},
    "qa": {"question": ["who sees ?"], "context": ["the cat sees the river ."]},
    "multiple_choice": {"context": ["the cat sees the river"],
                        "choices": [["the cat runs", "the river sees", "a blue car calls"]]},
}
result = {}
for task_type, path in json.loads(sys.argv[1]).items():
    function = tf.saved_model.load(path).signatures["serving_default"]
    outputs = function(**{k: tf.constant(v) for k, v in requests[task_type].items()})
    result[task_type] = {k: v.numpy().tolist() for k, v in outputs.items()}
assert not [m for m in sys.modules if m.split(".")[0] in ("kerasbert", "keras_hub", "keras_nlp")]
print(json.dumps(result, default=lambda b: b.decode("utf-8")))
"""


# 109 s (six console exports of the module's runs, then serving): the default suite
# serves exports of every task type in a process with only TensorFlow and refuses a
# console export over an existing version.
@slow_covered_by("tests/serving/test_export.py::test_regression_score_matches_keras",
                 "tests/serving/test_export.py::test_question_answering_outputs",
                 "tests/serving/test_export.py::test_tagging_words_labels_and_entities",
                 "tests/reliability/test_writers.py::test_export_refuses_an_existing_version_without_overwrite")
def test_exports_serve_raw_text_without_kerasbert(world, exported):
    for task_type, version in exported.items():
        assert (version / "saved_model.pb").is_file(), task_type
        assert (version / "assets.extra" / "tf_serving_warmup_requests").is_file(), task_type
    paths = json.dumps({k: str(v) for k, v in exported.items()})
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(SERVE), paths], cwd="/",
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    served = json.loads(result.stdout.strip().splitlines()[-1])

    classification = served["classification"]
    assert len(classification["probabilities"]) == 2
    for row in classification["probabilities"]:
        assert sum(row) == pytest.approx(1.0, abs=1e-5)
    assert set(classification["label"]) <= {"animal", "person"}
    assert len(served["pair"]["probabilities"][0]) == 2
    assert len(served["regression"]["score"]) == 1
    assert set(served["tagging"]["token_labels"][0]) <= {"O", "B-ANI", ""}
    answer = served["qa"]
    start, end = answer["start_char"][0], answer["end_char"][0]
    assert answer["answer"][0] == "the cat sees the river ."[start:end]
    choice = served["multiple_choice"]["probabilities"][0]
    assert len(choice) == 3 and sum(choice) == pytest.approx(1.0, abs=1e-5)


# --- runs that travel, and the refusals around them (issue 37, items 4-5) ----


# Needs the module's fine-tunings: a console process's progress in a log file; the
# default suite checks finetune's progress to a pipe in process.
@slow_covered_by("tests/training/test_finetune_cli.py::test_a_run_made_from_relative_paths_travels")
def test_progress_in_a_log_file_is_one_line_per_epoch(world, finetuned):
    """stdout is not a terminal: Keras' one-line-per-epoch output
    (verbose=2), not a progress bar redrawn at every step with `\\r`."""
    log = (world["root"] / "finetune.log").read_text()
    assert "\r" not in log and "\b" not in log
    epochs = [line for line in log.splitlines() if re.match(r"\d+/\d+ - \d+s", line)]
    assert len(epochs) == 1, log  # --epochs 1 (3 steps of 8 rows)


# 20 s on the module's runs, console processes from elsewhere/; the default suite
# evaluates and exports a run made from relative paths from another folder in process
# and converts a pretraining run with its tokenizer.
@slow_covered_by("tests/training/test_finetune_cli.py::test_a_run_made_from_relative_paths_travels",
                 "tests/serving/test_model_conversion.py::test_every_layout_reads_back_with_the_same_outputs")
def test_a_run_travels_to_another_directory(world, pretrained, finetuned, exported):
    """Made with relative paths in work/, used from elsewhere/: the
    pretraining run keeps its tokenizer (convert finds it), evaluate reads
    the run's own validation file, export.json names files by name and
    hash, never by a path of this machine."""
    elsewhere = world["root"] / "elsewhere"
    elsewhere.mkdir()
    run = json.loads((pretrained / "run" / "config.json").read_text())
    assert run["pretrain"]["vocab"] == "out/vocab.txt" and run["tokenizer"]["type"] == "wordpiece"
    assert (pretrained / "run" / "vocab.txt").read_text() == (pretrained / "vocab.txt").read_text()
    ok(kerasbert("convert", "--model", "../work/out/run", "--to", "hf", "--output", "hf",
                 cwd=elsewhere))
    assert (elsewhere / "hf" / "vocab.txt").read_text() == (pretrained / "vocab.txt").read_text()

    ft = "../work/" + finetuned["classification"]
    stdout = ok(kerasbert("evaluate", "--model", ft, "--batch-size", "8", cwd=elsewhere))
    assert "its own validation data" in stdout
    metrics = json.loads((elsewhere / ft / "metrics.json").read_text())["validation"]
    evaluation = json.loads((elsewhere / ft / "evaluation.json").read_text())["metrics"]
    assert evaluation["accuracy"] == pytest.approx(metrics["accuracy"], abs=1e-6)

    for task_type, version in exported.items():
        text = (version / "assets.extra" / "export.json").read_text()
        assert str(world["root"]) not in text, text
        info = json.loads(text)
        name = os.path.basename(world["specs"][task_type].partition(":")[2])
        assert info["task"] == world["specs"][task_type].partition(":")[0] + ":" + name
        digest = hashlib.sha256((world["data"] / name).read_bytes()).hexdigest()
        assert info["source"]["task_file"] == {"name": name, "sha256": digest}


# 24 s on the module's runs (console processes), with convert --to tf-hub of a lone
# .keras warning without naming --no-mlm; the default suite refuses evaluate without
# validation data (naming --split) in process and converts runs to tf-hub.
@slow_covered_by("tests/reliability/test_bad_input.py::test_evaluate_of_a_run_without_validation_data_names_split",
                 "tests/serving/test_model_conversion.py::test_every_layout_reads_back_with_the_same_outputs")
def test_errors_name_only_the_commands_own_flags(world, pretrained, finetuned):
    """evaluate on a run without validation data names --split (not
    finetune's --validation); convert --to tf-hub of a lone .keras file
    needs no --pretrainer / --no-mlm (flags of export-hub, not convert)."""
    work = world["work"]
    bare = work / "out" / "ft-bare"
    shutil.copytree(work / finetuned["classification"], bare)
    config = json.loads((bare / "config.json").read_text())
    config["validation_source"] = None  # as fine-tuned without --validation
    (bare / "config.json").write_text(json.dumps(config))
    before = tree(bare)
    line = one_line_error(kerasbert("evaluate", "--model", "out/ft-bare", cwd=work),
                          "fine-tuned without validation data", "--split")
    assert "--validation" not in line and tree(bare) == before

    lone = world["root"] / "lone"
    lone.mkdir()
    shutil.copy(pretrained / "run" / "backbone.keras", lone / "encoder.keras")
    result = kerasbert("convert", "--model", "lone/encoder.keras", "--vocab",
                       "work/out/vocab.txt", "--to", "tf-hub", "--output", "hub",
                       cwd=world["root"])
    ok(result)
    assert "without its .mlm" in result.stderr and "--no-mlm" not in result.stderr
    assert (world["root"] / "hub" / "encoder" / "saved_model.pb").is_file()


# 32 s on the module's run (console processes); the default suite makes the same
# refusals of pretrain and finetune --features in process.
@slow_covered_by("tests/training/test_pretrain_cli.py::test_refusals_leave_no_run_folder_and_the_run_untouched",
                 "tests/reliability/test_bad_input.py::test_finetune_refuses_features_of_another_length")
def test_pretrain_and_finetune_refusals_leave_nothing(world, pretrained):
    """A usage error in pretrain leaves no run folder (no empty
    checkpoints/); --resume --steps below the run's step is refused, the run
    untouched; finetune --features with another --max-seq-length than the
    features' is refused, not ignored."""
    work = world["work"]
    common = ["pretrain", "--preset", "bert_tiny", "--vocab", "out/vocab.txt",
              "--data", "out/shards", "--batch-size", "8", "--no-progress", *TINY_BERT]
    one_line_error(kerasbert(*common, "--output-dir", "out/refused", "--steps", "2",
                             "--set", "vocabulary_size=5", cwd=work),
                   "vocabulary_size=5 differs from --vocab")
    assert not (work / "out" / "refused").exists()

    run = pretrained / "run"
    before = tree(run)
    one_line_error(kerasbert(*common, "--output-dir", "out/run", "--steps", "3", "--resume",
                             cwd=work),
                   "already at step 6, past --steps 3")
    assert tree(run) == before

    ok(kerasbert("create-finetuning-data", "--task", world["specs"]["classification"],
                 "--vocab", "out/vocab.txt", "--max-seq-length", "32", "--output-dir",
                 "out/features", cwd=work))
    one_line_error(kerasbert("finetune", "--features", "out/features", "--max-seq-length", "24",
                             "--backbone", "out/run/backbone.keras", "--vocab", "out/vocab.txt",
                             "--output-dir", "out/ft-features", cwd=work),
                   "--max-seq-length 24 differs from the length of the --features",
                   "(32 tokens)")
    assert not (work / "out" / "ft-features").exists()
