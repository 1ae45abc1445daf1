"""ModernBERT's life cycle through the CLI, on a byte-level BPE vocabulary
written by `kerasbert vocab --type bpe`, with a tiny random ModernBERT
(2 layers: one global, one local with a window of 8):

    create-pretraining-data --objective none --no-masking
      -> pretrain --preset modernbert_base (dynamic masking at the family's
         30%, the bias-free masked-LM head) -> pretrain --resume
      -> fill-mask on the run
      -> finetune every task type (CLI) -> evaluate
      -> extract-features, embed

The export (8192 positions, TF Serving ops, a 2,048-token text served in a
fresh process) is tests/serving/test_modernbert_export.py; the Keras API on
raw text (`Task.from_preset(RUN)`, every task type) is
`test_keras_tasks_on_raw_text` below.
"""

import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "training"))
import pretrain_data as pd  # noqa: E402
from kerasbert.cli import main  # noqa: E402
from kerasbert.testing.files import write_jsonl  # noqa: E402
from reliability.console import kerasbert  # noqa: E402
from reliability.console import ok  # noqa: E402
from test_finetune_cli import squad_json  # noqa: E402
from test_finetune_cli import swag_csv  # noqa: E402
from test_finetune_cli import tagging_records  # noqa: E402
from test_finetune_cli import write_classification  # noqa: E402

from slow_marks import slow_covered_by  # noqa: E402

#: A tiny ModernBERT: layer 0 global, layer 1 local (window 8: 4 each side).
TINY = ("num_layers=2", "hidden_dim=32", "num_heads=2", "intermediate_dim=48",
        "local_attention=8", "global_attn_every_n_layers=2")


def _run(*args):
    assert main([str(a) for a in args]) in (0, None), args


def pretrain_args(vocab, data, run, steps, *extra):
    sets = [arg for value in TINY for arg in ("--set", value)]
    return ["pretrain", "--preset", "modernbert_base", "--vocab", vocab, "--data", data,
            "--output-dir", run, "--steps", steps, "--batch-size", 8, "--learning-rate", "1e-3",
            "--warmup-steps", 1, "--checkpoint-every", 2, "--log-every", 1, "--no-progress",
            "--seed", 3, *sets, *extra]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """{root, vocab, data, run, resume_output}: 4 steps, then resumed to 6."""
    root = tmp_path_factory.mktemp("modernbert")
    corpus = pd.write_corpus(str(root / "corpus.txt"), num_docs=60)
    _run("vocab", "--type", "bpe", "--input", corpus, "--vocab-size", 300, "--output",
         root / "bpe", "--no-progress")
    vocab, data, run = root / "bpe", root / "data", root / "run"
    _run("create-pretraining-data", "--input", corpus, "--vocab", vocab, "--output-dir", data,
         "--max-seq-length", 32, "--max-predictions-per-seq", 12, "--dupe-factor", 1,
         "--objective", "none", "--no-masking", "--no-progress")
    _run(*pretrain_args(vocab, data, run, 4))
    return {"root": root, "vocab": vocab, "data": data, "run": run}


def test_pretraining_masks_30_percent_with_a_bias_free_head(pretrained):
    import keras

    from kerasbert.saving import load_model

    run = pretrained["run"]
    config = json.load(open(run / "config.json"))
    assert config["backbone_class"] == "ModernBertBackbone"
    assert config["objectives"] == ["mlm"] and config["dynamic_masking"]
    assert config["masked_lm_prob"] == 0.3  # the family's, from recipes
    assert config["pretrain"]["masked_lm_prob"] is None  # not given
    history = [json.loads(line) for line in open(run / "history.jsonl")]
    assert [row["step"] for row in history] == [1, 2, 3, 4]
    assert all(np.isfinite(row["loss"]) for row in history)
    pretrainer = load_model(str(run / "pretrainer.keras"))
    head = pretrainer.masked_lm_head
    # ModernBERT's head: dense without bias -> GELU -> LayerNorm without
    # bias -> tied decoder + output bias.
    assert head.dense.bias is None and head.layer_norm.beta is None
    assert head.token_embedding is pretrainer.backbone.token_embedding
    names = sorted(w.path.split("/", 1)[1] for w in head.weights if w.path.startswith(head.name))
    assert names == ["output_bias", "transform/kernel", "transform_layer_norm/gamma"]
    assert head.get_config()["use_bias"] is False
    keras.backend.clear_session()


def test_dynamic_masking_draws_the_recorded_rate(pretrained):
    """The pipeline `pretrain` builds with the recorded rate chooses 30% of
    the maskable tokens (`max(1, round(0.3 n))`, at most 12 per row)."""
    from kerasbert.data import pretraining_dataset

    config = json.load(open(pretrained["run"] / "config.json"))
    batch = next(iter(pretraining_dataset(
        str(pretrained["data"]), 16, dynamic_masking=True, vocab_file=str(pretrained["vocab"]),
        masked_lm_prob=config["masked_lm_prob"], seed=0)))
    chosen = batch["masked_lm_weights"].numpy().sum(-1)
    maskable = batch["input_mask"].numpy().sum(-1) - 2  # [CLS]-like <s> and </s>
    expected = np.minimum(12, np.maximum(1, np.rint(maskable * 0.3)))
    np.testing.assert_array_equal(chosen, expected)


def test_resume_continues_from_the_last_checkpoint(pretrained, capsys):
    p = pretrained
    capsys.readouterr()
    _run(*pretrain_args(p["vocab"], p["data"], p["run"], 6, "--resume"))
    out = capsys.readouterr().out
    assert "Resumed from" in out and "ckpt-4" in out
    history = [json.loads(line) for line in open(p["run"] / "history.jsonl")]
    assert [row["step"] for row in history] == [1, 2, 3, 4, 5, 6]
    assert json.load(open(p["run"] / "config.json"))["masked_lm_prob"] == 0.3


def test_info_through_the_console_script(tmp_path):
    """What a user reads before pretraining or fine-tuning ModernBERT: the
    count, the recipe row (a starting point) and the 30% rate (one layer and
    100 tokens: the full model takes 15 s to build)."""
    from kerasbert.models import ModernBertBackbone
    from kerasbert.models import get_preset

    config = dict(get_preset("modernbert_base")["config"], num_layers=1, vocabulary_size=100)
    count = ModernBertBackbone.estimate_parameters(config)
    out = ok(kerasbert("info", "--preset", "modernbert_base", "--set", "num_layers=1",
                       "--set", "vocabulary_size=100", cwd=tmp_path))
    assert f"{count:,}" in out and "ModernBertBackbone" in out
    assert "learning_rate        5e-05" in out and "a starting point" in out
    assert "dynamic masking chooses 0.3 of the tokens" in out


def test_masking_rate_flag_is_checked(tmp_path, capsys):
    """--masked-lm-prob outside (0, 1], or on data that stores its masks, is
    refused in one line before anything trains."""
    vocab, static = pd.make_data(str(tmp_path), dupe_factor=1, num_shards=1)
    for value, data, expected in (("1.5", static, "must be in (0, 1]"),
                                  ("0.3", static, "applies to dynamic masking")):
        capsys.readouterr()
        code = main(["pretrain", "--preset", "bert_tiny", "--vocab", vocab, "--data", data,
                     "--output-dir", str(tmp_path / "run"), "--steps", "2", "--no-progress",
                     "--masked-lm-prob", value])
        err = capsys.readouterr().err.strip()
        assert code == 2 and len(err.splitlines()) == 1 and expected in err, err


def test_a_rate_capped_by_the_data_is_warned_of(capsys):
    """30% of a full 128-token row is 38 masks: data written with the
    default --max-predictions-per-seq 20 would quietly mask 16%."""
    from types import SimpleNamespace

    from kerasbert.training.pretrain import PretrainingRun

    run = SimpleNamespace(masked_lm_prob=0.3, sequence_length=128, num_predictions=20,
                          dynamic=True, is_chief=True)
    PretrainingRun._warn_of_a_capped_rate(run)
    err = capsys.readouterr().err
    assert "--max-predictions-per-seq 38" in err and "caps dynamic masking at 20" in err
    PretrainingRun._warn_of_a_capped_rate(SimpleNamespace(**{**vars(run), "masked_lm_prob": 0.15}))
    assert capsys.readouterr().err == ""


def test_fill_mask_on_the_run(pretrained, capsys):
    capsys.readouterr()
    _run("fill-mask", "--model", pretrained["run"], "--text", "the cat <mask> the river .",
         "--top-k", 3)
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["text"] == "the cat <mask> the river ."
    (guesses,) = result["masks"]
    assert len(guesses) == 3 and all(isinstance(g["token"], str) for g in guesses)
    probabilities = [g["probability"] for g in guesses]
    assert probabilities == sorted(probabilities, reverse=True) and sum(probabilities) <= 1.0


def _task_files(root, kind):
    """(--task spec, validation file, metric keys) of a tiny local task."""
    if kind == "classification":
        return (f"csv:{write_classification(root / 'train.csv', 32, 0)}",
                write_classification(root / "valid.csv", 12, 1), {"accuracy"})
    if kind == "tagging":
        return (f"jsonl:{write_jsonl(root / 'train.jsonl', tagging_records(24, 0))}",
                write_jsonl(root / "valid.jsonl", tagging_records(8, 1)), {"f1"})
    if kind == "qa":
        return (f"squad_json:{squad_json(root / 'train.json', 24, 0)}",
                squad_json(root / "valid.json", 8, 1), {"exact_match", "f1"})
    return (f"swag:{swag_csv(root / 'train.csv', 24, 0)}", swag_csv(root / "valid.csv", 8, 1),
            {"accuracy"})


# 11-22 s each (a fine-tuning run with per-epoch validation, then evaluate): the
# default suite runs classification through the CLI and the task types through the
# Keras API on this run (test_keras_tasks_on_raw_text), and the BERT CLI tests run
# the same commands for the other types.
CLI_CLASSIFICATION = ("tests/models/modernbert/test_modernbert_life_cycle.py::"
                      "test_finetune_and_evaluate_every_task_type")
KERAS_TASKS = "tests/models/modernbert/test_modernbert_life_cycle.py::test_keras_tasks_on_raw_text"
BERT_CLI = "tests/training/test_finetune_cli.py::test_every_task_type_runs_end_to_end"


@pytest.mark.parametrize("kind", [
    "classification",
    *(pytest.param(kind, marks=slow_covered_by(CLI_CLASSIFICATION, KERAS_TASKS, BERT_CLI))
      for kind in ("tagging", "qa", "multiple_choice"))])
def test_finetune_and_evaluate_every_task_type(pretrained, tmp_path, kind):
    """finetune --backbone RUN/backbone.keras -> metrics.json -> evaluate,
    the same numbers (sentence pairs: `test_keras_tasks_on_raw_text`)."""
    import keras

    task, valid, keys = _task_files(tmp_path, kind)
    out = tmp_path / "ft"
    extra = (["--max-query-length", 12, "--doc-stride", 16] if kind == "qa" else [])
    _run("finetune", "--backbone", pretrained["run"] / "backbone.keras", "--vocab",
         pretrained["vocab"], "--task", task, "--validation", valid, "--output-dir", out,
         "--epochs", 1, "--batch-size", 8, "--learning-rate", "1e-3",
         "--max-seq-length", 48 if kind == "qa" else 24, "--no-progress", *extra)
    config = json.load(open(out / "config.json"))
    assert config["task_type"] == kind
    metrics = json.load(open(out / "metrics.json"))["validation"]
    assert keys <= set(metrics), metrics
    _run("evaluate", "--model", out, "--split", valid, "--batch-size", 16)
    evaluation = json.load(open(out / "evaluation.json"))["metrics"]
    for key in keys:
        assert evaluation[key] == pytest.approx(metrics[key])
    model = keras.saving.load_model(str(out / "model.keras"))
    assert type(model.backbone).__name__ == "ModernBertBackbone"
    keras.backend.clear_session()


def test_extract_features_and_embed(pretrained, tmp_path):
    from kerasbert.saving import load_model

    texts = tmp_path / "texts.txt"
    texts.write_text("the cat sees the river\nmy sister paints a blue car\n", encoding="utf-8")
    features = tmp_path / "features.jsonl"
    _run("extract-features", "--backbone", pretrained["run"] / "backbone.keras", "--vocab",
         pretrained["vocab"], "--input", texts, "--output", features, "--layers", "-1,-2",
         "--max-seq-length", 16)
    rows = [json.loads(line) for line in open(features)]
    assert len(rows) == 2
    first = rows[0]["features"][0]["layers"]
    assert [layer["index"] for layer in first] == [-1, -2]
    assert all(len(layer["values"]) == 32 for layer in first)
    vectors = tmp_path / "vectors.npy"
    _run("embed", "--model", pretrained["run"], "--input", texts, "--output", vectors)
    embedded = np.load(vectors)
    assert embedded.shape == (2, 32) and np.isfinite(embedded).all()
    assert not np.allclose(embedded[0], embedded[1])
    backbone = load_model(str(pretrained["run"] / "backbone.keras"))
    assert type(backbone).__name__ == "ModernBertBackbone"


#: Raw text and labels per task type, as a user's `fit` takes them.
RAW = {
    "classification": (["the cat sees the river", "my sister paints a car"] * 4,
                        ["animal", "person"] * 4),
    "pair": ((["the cat sees", "my sister paints"] * 4, ["the river", "a blue car"] * 4),
             ["yes", "no"] * 4),
    "tagging": ([["the", "cat", "sees"], ["my", "sister", "paints", "a", "car"]] * 4,
                [["O", "B-ANI", "O"], ["O", "O", "O", "O", "O"]] * 4),
    "qa": ((["who sees the river ?", "who paints a car ?"] * 4,
            ["today the cat sees the river .", "at night my sister paints a car ."] * 4),
           [{"text": "the cat", "answer_start": 6}, {"text": "my sister", "answer_start": 9}] * 4),
    "multiple_choice": ((["the cat sees", "my sister paints"] * 4,
                         [["the river", "a car", "joy"], ["a tree", "a car", "the park"]] * 4),
                        [0, 1] * 4),
}


def _task(kind, run):
    from kerasbert.tasks import MultipleChoice, QuestionAnswerer, TextClassifier, TokenClassifier

    if kind == "classification":
        return TextClassifier.from_preset(run, num_classes=2)
    if kind == "pair":
        return TextClassifier.from_preset(run, label_names=["no", "yes"])
    if kind == "tagging":
        return TokenClassifier.from_preset(run, label_names=["O", "B-ANI"])
    if kind == "qa":
        return QuestionAnswerer.from_preset(run, sequence_length=32, max_query_length=8,
                                            doc_stride=8)
    return MultipleChoice.from_preset(run, num_choices=3)


# 15-30 s on 2 busy cores (QA's windows and span decoding): the default suite fits
# the other four types here; QA on raw text is the BERT tests' (the same head and
# BPE offsets as RoBERTa's QA).
RAW_TEXT_BERT = "tests/tasks/test_raw_text_lifecycle.py::test_fits_and_predicts_from_strings"
QA_SPANS = ("tests/tasks/test_raw_text_preprocessing.py::"
            "test_qa_predict_decodes_windows_back_to_character_spans")


@pytest.mark.parametrize("kind", [
    *(kind for kind in sorted(RAW) if kind != "qa"),
    pytest.param("qa", marks=slow_covered_by(RAW_TEXT_BERT, QA_SPANS))])
def test_keras_tasks_on_raw_text(pretrained, kind, tmp_path):
    """`Task.from_preset(RUN)` (the run's ModernBERT and BPE tokenizer) ->
    `fit` on strings -> `predict` on strings; classification saves and
    reloads to the same predictions."""
    import keras

    keras.utils.set_random_seed(0)
    model = _task(kind, str(pretrained["run"]))
    assert type(model.backbone).__name__ == "ModernBertBackbone"
    x, y = RAW[kind]
    history = model.fit(x, y, epochs=1, batch_size=4, verbose=0).history
    assert np.isfinite(history["loss"]).all()
    head = tuple(v[:2] for v in x) if isinstance(x, tuple) else x[:2]
    predicted = model.predict(head, verbose=0)
    assert np.isfinite(np.concatenate([np.ravel(np.asarray(v, "float64")) for v in
                                       keras.tree.flatten(predicted)
                                       if np.asarray(v).dtype.kind == "f"])).all()
    if kind != "classification":
        return
    model.save(str(tmp_path / "task.keras"))
    again = keras.saving.load_model(str(tmp_path / "task.keras")).predict(head, verbose=0)
    for got, want in zip(keras.tree.flatten(again), keras.tree.flatten(predicted)):
        if isinstance(want, np.ndarray) and want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, atol=1e-5)
        else:
            assert np.asarray(got).tolist() == np.asarray(want).tolist()
    keras.backend.clear_session()
