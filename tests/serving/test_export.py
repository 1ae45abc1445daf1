"""`kerasbert export`: SavedModels for every task type, checked in a fresh
process that imports only tensorflow and tensorflow_text, against the Keras
model on the Python pipeline (QA's decoding parity: test_qa_serving.py)."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from kerasbert.testing import assert_same_decisions
from reliability.console import kerasbert
from reliability.console import ok
from serving_fixtures import make_finetuned_dir
from serving_fixtures import run_fresh
from serving_fixtures import shared_export
from slow_marks import slow_covered_by

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TASKS = ("classification", "pair", "regression", "tagging", "multiple_choice", "qa")
TEXTS = [
    "John Smith lives in Paris, France.",
    "The quick brown fox jumps over the lazy dog near London.",
    "Naïve café owners in Tokyo 東京 work fast!",
    "a",
]
CHOICES = [
    ["the dog runs", "the cat jumps over", "mary works"],
    ["one", "two three", "paris is a city"],
    ["red", "green", "blue"],
    ["a", "b", "c"],
]
HOSTILE = [
    "", "   \t\n  ", "x" * 100_000, ("word " * 20_000).strip(),
    b"bad \xff\xfe utf-8 \xc3(", "\x00\x07ctrl\u200b\u200c\u200dzero\ufeffwidth",
    "emoji 😀🎉 and CJK 東京タワー 한국어",
]


def _inputs(task_type, texts):
    if task_type == "pair":
        return {"text_a": texts, "text_b": list(reversed(texts))}
    if task_type == "multiple_choice":
        return {"context": texts, "choices": [CHOICES[i % len(CHOICES)] for i in range(len(texts))]}
    if task_type == "qa":
        return {"question": texts, "context": list(reversed(texts))}
    return {"text": texts}


@pytest.fixture(scope="module")
def exports(shared_builds):
    """{task type: (export dir, expected outputs)}; each SavedModel was made
    from a copy of its FT dir deleted after export (`shared_export`), so it
    must be self-contained."""
    result = {}
    for task_type in TASKS:
        ft, info = shared_export(shared_builds, task_type)
        expected = keras_expectations(ft, task_type) if task_type != "qa" else None
        result[task_type] = (info["path"], expected)
    return result


def keras_expectations(ft, task_type):
    """The fine-tuned Keras model on features from the Python pipeline."""
    import keras

    from kerasbert.data.finetuning import convert_examples
    from kerasbert.data.finetuning.examples import TaskData
    from kerasbert.text import WordPieceTokenizer

    config = json.load(open(os.path.join(ft, "config.json")))
    model = keras.saving.load_model(os.path.join(ft, "model.keras"))
    tokenizer = WordPieceTokenizer(os.path.join(ft, "vocab.txt"))
    labels = config["label_names"]
    if task_type == "tagging":
        return {"model": model, "tokenizer": tokenizer, "labels": labels,
                "length": config["max_seq_length"]}
    if task_type == "multiple_choice":
        examples = [{"context": t, "choices": c} for t, c in zip(TEXTS, CHOICES)]
    elif task_type == "pair":
        examples = [{"text_a": a, "text_b": b} for a, b in zip(TEXTS, reversed(TEXTS))]
    else:
        examples = [{"text_a": t} for t in TEXTS]
    data = TaskData(examples, task_type, labels, has_labels=False)
    features = convert_examples(data, tokenizer, config["max_seq_length"])
    logits = np.asarray(model.predict(features.x, verbose=0), "float64")
    if task_type == "regression":
        return {"score": logits[:, 0]}
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    return {"probabilities": probabilities, "labels": labels}


# Loads every export and runs the batch and the hostile inputs; prints JSON.
SERVE_SCRIPT = """
import sys
spec = json.load(open(sys.argv[1]))
exports, batches = spec["exports"], spec["batches"]
hostile = [bytes.fromhex(h) for h in spec["hostile"]]
result = {}
for task_type, path in exports.items():
    loaded = tf.saved_model.load(path)
    serve = loaded.signatures["serving_default"]
    out = {k: v.numpy() for k, v in serve(**{k: tf.constant(v) for k, v in batches[task_type].items()}).items()}
    row = {k: (v.astype(object).tolist() if v.dtype == object else v.tolist()) for k, v in out.items()}
    row = json.loads(json.dumps(row, default=lambda b: b.decode("utf-8")))
    # Hostile inputs, one batch: every output finite with batch dimension B.
    checks = []
    for texts in (hostile, [], ["fine text"] * 512):
        names = [spec.name for spec in serve.structured_input_signature[1].values()]
        if task_type == "multiple_choice":
            choices = int(serve.structured_input_signature[1]["choices"].shape[1])
            feed = {"context": tf.constant(texts, tf.string),
                    "choices": tf.constant([[t] * choices for t in texts], tf.string, shape=[len(texts), choices])}
        else:
            feed = {n: tf.constant(texts, tf.string) for n in names}
        got = serve(**feed)
        for k, v in got.items():
            v = v.numpy()
            assert v.shape[0] == len(texts), (task_type, k, v.shape)
            if v.dtype.kind == "f":
                assert np.isfinite(v).all(), (task_type, k)
        checks.append(len(texts))
    row["_checked_batches"] = checks
    from tensorflow.python.framework import op_def_registry
    ops = json.load(open(os.path.join(path, "assets.extra", "ops.json")))["custom_ops"]
    row["_custom_ops_registered"] = [op for op in ops if op_def_registry.get(op) is not None]
    row["_signatures"] = sorted(loaded.signatures)
    result[task_type] = row
result["_tensorflow_text_version"] = tensorflow_text.__version__
_check_imports()
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def served(exports, tmp_path_factory):
    spec = {
        "exports": {t: p for t, (p, _) in exports.items()},
        "batches": {t: _inputs(t, TEXTS) for t in TASKS},
        "hostile": [(h if isinstance(h, bytes) else h.encode()).hex() for h in HOSTILE],
    }
    path = tmp_path_factory.mktemp("served") / "spec.json"
    path.write_text(json.dumps(spec))
    out = run_fresh(SERVE_SCRIPT, path)
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("task_type", ["classification", "pair", "multiple_choice"])
def test_probabilities_match_keras(exports, served, task_type):
    """Probabilities within 1e-5; the served label / choice is the Keras
    model's wherever its top-2 margin is over 1e-4 (random weights leave
    near ties, e.g. 1.6e-7 apart, that either side may break) and one of
    the near-best elsewhere."""
    expected, got = exports[task_type][1], served[task_type]
    if task_type == "multiple_choice":
        assert_same_decisions(expected["probabilities"], got["probabilities"], got["choice"],
                              atol=1e-5, labels=CHOICES, decoded=got["choice_text"])
    else:
        assert_same_decisions(expected["probabilities"], got["probabilities"], got["label_id"],
                              atol=1e-5, labels=expected["labels"], decoded=got["label"])
    assert served[task_type]["_checked_batches"] == [len(HOSTILE), 0, 512]
    assert served[task_type]["_signatures"] == ["serve_token_ids", "serving_default"]


def test_regression_score_matches_keras(exports, served):
    np.testing.assert_allclose(served["regression"]["score"], exports["regression"][1]["score"],
                               atol=1e-5)


def test_tagging_words_labels_and_entities(exports, served):
    """Words are BERT's pre-tokenized words; each word's probabilities are
    the Keras model's at its first piece on `convert_tagging` features, its
    label theirs where the top two are clearly apart, and the entities are
    seqeval's chunks of the served word labels."""
    from seqeval.metrics.sequence_labeling import get_entities

    from kerasbert.data.finetuning import convert_examples
    from kerasbert.data.finetuning.examples import TaskData

    context, got = exports["tagging"][1], served["tagging"]
    words_expected, words_served, words_labels = [], [], []
    for row, text in enumerate(TEXTS):
        n = got["num_tokens"][row]
        words = got["tokens"][row][:n]
        starts, ends = got["token_start_char"][row][:n], got["token_end_char"][row][:n]
        assert words == [text[s:e] for s, e in zip(starts, ends)]
        assert "".join(words) == "".join(text.split())  # nothing lost, nothing added
        data = TaskData([{"tokens": words}], "tagging", context["labels"], has_labels=False)
        features = convert_examples(data, context["tokenizer"], context["length"])
        logits = np.asarray(context["model"].predict(features.x, verbose=0), "float64")[0]
        first = np.flatnonzero(np.diff(np.concatenate([[-1], features.extras["word_ids"][0]])) != 0)
        first = [p for p in first if features.extras["word_ids"][0][p] >= 0]
        probs = np.exp(logits[first] - logits[first].max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        labels = got["token_labels"][row][:n]
        words_expected.append(probs)
        words_served.append(np.asarray(got["token_probabilities"][row][:n]).reshape(probs.shape))
        words_labels += labels
        # The entities are seqeval's chunks of the served word labels.
        chunks = get_entities(labels)
        m = got["num_entities"][row]
        assert got["entity_label"][row][:m] == [kind for kind, _, _ in chunks]
        assert got["start_char"][row][:m] == [starts[a] for _, a, _ in chunks]
        assert got["end_char"][row][:m] == [ends[b] for _, _, b in chunks]
        assert got["entity_text"][row][:m] == [text[starts[a]:ends[b]] for _, a, b in chunks]
    # Each word's label is the Keras model's wherever its top-2 margin is
    # clear, and a near-best one elsewhere.
    assert_same_decisions(np.concatenate(words_expected), np.concatenate(words_served),
                          [context["labels"].index(label) for label in words_labels], atol=1e-5)


# (task type, serving_default inputs, some of its outputs): name -> dtype.
SIGNATURE_CONTRACT = [
    ("pair", {"text_a": "DT_STRING", "text_b": "DT_STRING"},
     {"probabilities": "DT_FLOAT", "label_id": "DT_INT32", "label": "DT_STRING"}),
    ("tagging", {"text": "DT_STRING"},
     {"entity_text": "DT_STRING", "entity_label": "DT_STRING", "start_char": "DT_INT32",
      "end_char": "DT_INT32", "num_entities": "DT_INT32", "token_labels": "DT_STRING"}),
]


# 20 s: two runs of the saved_model_cli console script; the default suite
# checks the same signature defs, read from saved_model.pb as it reads them.
@slow_covered_by("tests/serving/test_export.py::test_signature_defs_as_saved_model_cli_reads_them")
def test_saved_model_cli_contract(exports):
    """`saved_model_cli show`: names, dtypes, batch dimension -1, method."""
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    for task_type, inputs, outputs in SIGNATURE_CONTRACT:
        shown = subprocess.run([cli, "show", "--dir", exports[task_type][0], "--all"],
                               capture_output=True, text=True, check=True).stdout
        default = shown.split("signature_def['serving_default']:")[1]
        ids = shown.split("signature_def['serve_token_ids']:")[1].split("signature_def[")[0]
        for kind, names in (("inputs", inputs), ("outputs", outputs)):
            for name, dtype in names.items():
                block = default.split(f"{kind}['{name}'] tensor_info:")[1].split("name:")[0]
                assert f"dtype: {dtype}" in block, (task_type, name, block)
                assert "shape: (-1" in block, (task_type, name, block)
        for part in (default, ids):
            assert "Method name is: tensorflow/serving/predict" in part.split("signature_def[")[0]
        for name in ("input_word_ids", "input_mask", "input_type_ids"):
            block = ids.split(f"inputs['{name}'] tensor_info:")[1].split("name:")[0]
            assert "dtype: DT_INT32" in block and "shape: (-1, 32)" in block


def test_signature_defs_as_saved_model_cli_reads_them(exports):
    """The contract `test_saved_model_cli_contract` reads from the console
    script, from the MetaGraphDef the script reads
    (`saved_model_utils.get_meta_graph_def`): names, dtypes, batch
    dimension -1, method."""
    from tensorflow.core.framework import types_pb2
    from tensorflow.python.tools import saved_model_utils

    for task_type, inputs, outputs in SIGNATURE_CONTRACT:
        graph = saved_model_utils.get_meta_graph_def(exports[task_type][0], "serve")
        signatures = graph.signature_def
        default, ids = signatures["serving_default"], signatures["serve_token_ids"]
        for kind, names in (("inputs", inputs), ("outputs", outputs)):
            for name, dtype in names.items():
                info = getattr(default, kind)[name]
                assert types_pb2.DataType.Name(info.dtype) == dtype, (task_type, name)
                assert info.tensor_shape.dim[0].size == -1, (task_type, name)
        for signature in (default, ids):
            assert signature.method_name == "tensorflow/serving/predict"
        for name in ("input_word_ids", "input_mask", "input_type_ids"):
            info = ids.inputs[name]
            assert types_pb2.DataType.Name(info.dtype) == "DT_INT32"
            assert [d.size for d in info.tensor_shape.dim] == [-1, 32]


def test_export_files_warmup_and_ops(exports):
    from kerasbert.serving.warmup import read_warmup

    path = exports["tagging"][0]
    assert open(os.path.join(path, "assets", "vocab.txt")).readline().strip() == "[PAD]"
    requests = read_warmup(os.path.join(path, "assets.extra", "tf_serving_warmup_requests"))
    texts = [r["text"][0] for sig, r in requests if sig == "serving_default"]
    assert b"" in texts and any(len(t) >= 100_000 for t in texts)
    assert any(not t.isascii() for t in texts)
    assert ("serve_token_ids", 32) in [(sig, r["input_word_ids"].shape[-1])
                                       for sig, r in requests if sig == "serve_token_ids"]
    info = json.load(open(os.path.join(path, "assets.extra", "export.json")))
    assert info["task_type"] == "tagging" and info["inputs"] == ["text"]
    qa = json.load(open(os.path.join(exports["qa"][0], "assets.extra", "export.json")))
    assert qa["inputs"] == ["question", "context"] and qa["qa"]["version_2_with_negative"]


def test_question_answering_outputs(served):
    got = served["qa"]
    assert got["_checked_batches"] == [len(HOSTILE), 0, 512]
    for row, context in enumerate(reversed(TEXTS)):
        start, end = got["start_char"][row], got["end_char"][row]
        assert got["answer"][row] == (context[start:end] if start >= 0 else "")
        assert got["no_answer"][row] == (start < 0)


def test_custom_ops_are_registered_by_tensorflow_text(exports, served):
    """Each op in ops.json is not core TensorFlow, and the fresh process
    (tensorflow + tensorflow_text 2.20, the version TF Serving 2.20 links)
    has it registered."""
    import tensorflow as tf

    for task_type, (path, _) in exports.items():
        manifest = json.load(open(os.path.join(path, "assets.extra", "ops.json")))
        assert {"FastWordpieceTokenizeWithOffsets", "NormalizeUTF8"} <= set(manifest["custom_ops"])
        assert not any(hasattr(tf.raw_ops, op) for op in manifest["custom_ops"])
        assert served[task_type]["_custom_ops_registered"] == manifest["custom_ops"]
    assert served["_tensorflow_text_version"].startswith("2.20.")


def _failed_exports_leave_the_versions(ft, out, newest, monkeypatch):
    """Exports of `ft` into `out` that fail at their warm-up replay (one
    overwriting version `newest`, one adding the next) leave the versions
    1..newest as they were and nothing else."""
    from kerasbert.serving import exporter

    stamp = os.path.getmtime(out / str(newest) / "saved_model.pb")

    def broken(path, requests):
        raise RuntimeError("warm-up failed")

    monkeypatch.setattr(exporter, "replay_warmup", broken)
    with pytest.raises(RuntimeError):
        exporter.export_finetuned(ft, str(out), version=newest, overwrite=True)
    with pytest.raises(RuntimeError):
        exporter.export_finetuned(ft, str(out))
    assert sorted(os.listdir(out)) == [str(v) for v in range(1, newest + 1)]
    assert os.path.getmtime(out / str(newest) / "saved_model.pb") == stamp


# 14 s: five exports (versions 1-3 through the CLI and export_saved_model.py);
# the default suite checks the refusals and the failed exports on a copy of
# the shared export, and test_batching exports twice into one model folder.
@slow_covered_by("tests/serving/test_export.py::test_failed_exports_leave_the_versions_alone",
                 "tests/serving/test_batching.py::test_export_writes_both_files_and_keeps_an_operators_file")
def test_versions_overwrite_and_atomic_failure(tmp_path, monkeypatch):
    from kerasbert.cli import main

    ft = make_finetuned_dir(str(tmp_path / "ft"), "classification")
    out = tmp_path / "export" / "clf"
    assert main(["export", "--model", ft, "--output", str(out)]) == 0
    assert main(["export", "--model", ft, "--output", str(out)]) == 0
    assert sorted(os.listdir(out)) == ["1", "2"]
    assert main(["export", "--model", ft, "--output", str(out), "--version", "2"]) == 2
    # The failed exports leave neither a version 3 nor temporary directories,
    # and version 2 is untouched.
    _failed_exports_leave_the_versions(ft, out, 2, monkeypatch)
    assert main(["export", "--model", str(tmp_path / "nope"), "--output", str(out)]) == 2
    # The script form takes the same flags.
    monkeypatch.undo()
    script = importlib.util.spec_from_file_location(
        "export_saved_model", os.path.join(REPO, "export", "export_saved_model.py"))
    module = importlib.util.module_from_spec(script)
    script.loader.exec_module(module)
    assert module.main(["--model", ft, "--output", str(out)]) == 0
    assert sorted(os.listdir(out)) == ["1", "2", "3"]
    assert main(["export", "--model", ft, "--output", str(out), "--max-seq-length", "999"]) == 2


def test_failed_exports_leave_the_versions_alone(shared_builds, tmp_path, monkeypatch):
    """Next to a version 1 (a copy of the session's classification export):
    an existing --version is refused, and an export that fails (at its
    warm-up replay) neither replaces version 1 nor leaves a version 2 or a
    temporary directory; bad arguments exit 2."""
    import shutil

    from kerasbert.cli import main

    ft, info = shared_export(shared_builds, "classification")
    out = tmp_path / "export" / "clf"
    shutil.copytree(info["path"], out / "1")
    assert main(["export", "--model", ft, "--output", str(out), "--version", "1"]) == 2
    _failed_exports_leave_the_versions(ft, out, 1, monkeypatch)
    monkeypatch.undo()
    assert main(["export", "--model", str(tmp_path / "nope"), "--output", str(out)]) == 2
    assert main(["export", "--model", ft, "--output", str(out), "--max-seq-length", "999"]) == 2
    assert sorted(os.listdir(out)) == ["1"]


def _imported_modules(stderr):
    """Module names that `PYTHONPROFILEIMPORTTIME=1` listed on stderr."""
    return {line.rsplit("|", 1)[-1].strip() for line in stderr.splitlines()
            if line.startswith("import time:")}


def test_predict_cli(exports, tmp_path, capsys):
    """`kerasbert predict` on the tagging export as the installed console
    script: one JSON row per text, and the process imports no model code
    (Python's own import log says what it loaded). The multiple-choice and
    pair exports in this process (`main`): a missing --text-b is a usage
    error naming it."""
    from kerasbert.cli import main

    done = kerasbert("predict", "--saved-model", exports["tagging"][0], "--text", TEXTS[0],
                     "--text", "Paris", cwd=tmp_path, PYTHONPROFILEIMPORTTIME="1")
    rows = [json.loads(line) for line in ok(done).strip().splitlines()[-2:]]
    assert rows[0]["tokens"][:3] == ["John", "Smith", "lives"]
    assert len(rows[1]["tokens"]) == rows[1]["num_tokens"] == 1
    assert len(rows[0]["entity_text"]) == rows[0]["num_entities"]
    imported = _imported_modules(done.stderr)
    assert "kerasbert.commands.predict" in imported and "tensorflow" in imported
    model_code = ("kerasbert.models", "kerasbert.layers", "kerasbert.tasks.task",
                  "keras_hub", "keras_nlp", "tf_keras")
    # The tokenizer class's module, not the plain-Python file facts beside it
    # (tokenizer_loading, tokenizer_paths, tokenizer_json_files).
    assert not sorted(m for m in imported if m.startswith(model_code)
                      or m == "kerasbert.text.tokenizer")
    assert main(["predict", "--saved-model", exports["multiple_choice"][0], "--context", TEXTS[0],
                 "--choice", "a", "--choice", "b", "--choice", "c"]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(row["probabilities"]) == 3 and row["choice_text"] in ("a", "b", "c")
    assert main(["predict", "--saved-model", exports["pair"][0], "--text", "x"]) == 2
    assert "--text-b" in capsys.readouterr().err


def test_export_model_trained_in_a_script(tmp_path):
    """`export_model` takes an in-memory model and tokenizer (no finetune
    directory), and asks for what it cannot guess."""
    import keras
    import tensorflow as tf

    from kerasbert.cli import UsageError
    from kerasbert.serving import export_model
    from kerasbert.text import WordPieceTokenizer

    ft = make_finetuned_dir(str(tmp_path / "ft"), "tagging")
    model = keras.saving.load_model(os.path.join(ft, "model.keras"))
    tokenizer = WordPieceTokenizer(os.path.join(ft, "vocab.txt"))
    with pytest.raises(UsageError, match="label_names"):
        export_model(model, tokenizer, "tagging", str(tmp_path / "ner"))
    labels = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    result = export_model(model, tokenizer, "tagging", str(tmp_path / "ner"), label_names=labels,
                          sequence_length=24)
    serve = tf.saved_model.load(result["path"]).signatures["serving_default"]
    out = serve(text=tf.constant(["Mary lives in Paris."]))
    assert set(out["token_labels"].numpy()[0][:5].astype(str)) <= set(labels)


def test_distil_bert_classifier_exports(tmp_path):
    """A backbone without a pooler (DistilBERT: [CLS] -> pre-classifier
    dense) exports and serves exactly like BERT."""
    import tensorflow as tf

    from kerasbert.serving.exporter import export_finetuned

    ft = make_finetuned_dir(str(tmp_path / "ft"), "classification", family="DistilBertBackbone")
    expected = keras_expectations(ft, "classification")
    result = export_finetuned(ft, str(tmp_path / "export" / "distil"))
    serve = tf.saved_model.load(result["path"]).signatures["serving_default"]
    out = serve(text=tf.constant(TEXTS))
    assert_same_decisions(expected["probabilities"], out["probabilities"].numpy(),
                          out["label_id"].numpy(), atol=1e-5, labels=expected["labels"],
                          decoded=out["label"].numpy().astype(str).tolist())

