"""An ELMo fine-tuning run is an ordinary run: `kerasbert finetune` (no
--vocab) writes config.json naming the character input, `kerasbert
evaluate --model FT` scores it from another folder, `kerasbert export`
writes a TF Serving SavedModel whose graph splits raw strings into words
and numbers their characters (tf.strings ops), and `kerasbert predict`
answers from it in a fresh process; the SavedModel loads with tensorflow +
tensorflow_text alone and answers as the Keras model does."""

import json
import os
import sys

import numpy as np
import tensorflow as tf

from kerasbert.convert.elmo_weights import save_elmo
from kerasbert.models import ElmoBackbone
from kerasbert.text.elmo_characters import batch_char_ids
from kerasbert.text.elmo_words import split_words
from kerasbert.text.elmo_words import split_words_with_offsets
from kerasbert.text.elmo_words import words_to_char_ids
from kerasbert.testing.files import write_csv
from kerasbert.testing.files import write_jsonl
from reliability.console import kerasbert as console
from reliability.console import ok
from reliability.console import one_line_error

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "serving"))
from serving_fixtures import run_fresh  # noqa: E402
from slow_marks import slow_covered_by  # noqa: E402

TINY = dict(lstm_dim=8, projection_dim=4, num_layers=1, num_highway=1,
            filters=[[1, 4], [2, 4]], max_characters_per_token=50)
HOSTILE = ["", "   \t\n ", "x" * 70 + " " + "é" * 30 + " 東京", "naïve café 😀 Ωmega",
           "NUL\x00inside \x00", "a\u00a0b\u200bc"]

SERVE = """
loaded = tf.saved_model.load(sys.argv[1])
texts = json.loads(sys.argv[2])
out = loaded.signatures["serving_default"](text=tf.constant(texts))
_check_imports()
print(json.dumps({k: (v.numpy().tolist() if v.dtype != tf.string else
                      [[x.decode() for x in row] if v.shape.rank == 2 else row.decode()
                       for row in v.numpy()]) for k, v in out.items()}))
"""


def _tagging_records():
    rows = [(["Alice", "met", "Bob"], ["B-PER", "O", "B-PER"]),
            (["Bob", "saw", "Paris"], ["B-PER", "O", "B-LOC"]),
            (["Seoul", "is", "big"], ["B-LOC", "O", "O"])]
    return [{"tokens": words, "labels": tags} for words, tags in rows * 4]


def test_graph_char_ids_equal_python_ones_on_hostile_strings():
    words = split_words(tf.constant(HOSTILE))
    ids, mask = words_to_char_ids(words, 50)
    python_words = [[w.decode("utf-8") for w in row] for row in words.to_list()]
    expected_ids, expected_mask = batch_char_ids(python_words, 50)
    np.testing.assert_array_equal(ids.numpy(), expected_ids)
    np.testing.assert_array_equal(mask.numpy(), expected_mask)
    assert python_words[0] == [] and python_words[1] == []
    # A 70-byte word keeps its first 48 bytes between the marks; 30 "é" (60
    # bytes) are cut at a byte, as the published batcher cuts them.
    long_row = ids.numpy()[2]
    assert long_row[0, 0] == 259 and long_row[0, 49] == 260 and long_row[1, 49] == 260
    assert (long_row[0, 1:49] == ord("x") + 1).all()
    assert python_words[4] == ["NULinside"]  # control characters are dropped, as BERT's
    # The spans point into the original text.
    w, starts, ends = split_words_with_offsets(tf.constant(HOSTILE))
    assert w.to_list() == words.to_list()
    for text, row, s, e in zip(HOSTILE, python_words, starts.to_list(), ends.to_list()):
        for word, a, b in zip(row, s, e):
            assert text[a:b].replace("\x00", "").replace("\u200b", "") == word


def _tiny_elmo(tmp_path):
    save_elmo(ElmoBackbone(**TINY), tmp_path / "elmo")
    return tmp_path / "elmo"


# 98 s: finetune, evaluate, export and predict as fresh console-script processes, then a
# TensorFlow-only process; the default suite covers each piece: an ELMo directory fine-tuned
# in process, a tagger on a frozen biLM saved and reloaded, the export graph's word split and
# character ids, and the export of a run trained in a script.
@slow_covered_by("tests/models/elmo/test_elmo_features.py::test_finetune_on_a_frozen_elmo_in_process",
                 "tests/models/elmo/test_elmo_tasks.py::test_tagging_on_a_frozen_elmo",
                 "tests/models/elmo/test_elmo_runs.py::test_graph_char_ids_equal_python_ones_on_hostile_strings",
                 "tests/serving/test_export.py::test_export_model_trained_in_a_script")
def test_console_tagging_run_evaluates_exports_and_serves(tmp_path):
    elmo = _tiny_elmo(tmp_path)
    train = write_jsonl(tmp_path / "train.jsonl", _tagging_records())
    valid = write_jsonl(tmp_path / "valid.jsonl", _tagging_records()[:3])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ok(console("finetune", "--task", f"jsonl:{train}", "--task-type", "tagging", "--preset",
               elmo, "--freeze-backbone", "--output-dir", tmp_path / "ft", "--validation", valid,
               "--epochs", "2", "--batch-size", "4", "--learning-rate", "1e-2",
               "--max-seq-length", "8", "--no-progress", cwd=tmp_path))
    config = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert config["input"] == {"type": "elmo_characters", "max_characters": 50}
    assert "tokenizer" not in config and config["max_seq_length"] == 8
    metrics = json.loads((tmp_path / "ft" / "metrics.json").read_text())
    assert len(metrics["history"]["dev_f1"]) == 2 and metrics["selection"] is not None

    # evaluate, from another folder: the run's own validation file, per-word seqeval F1.
    printed = ok(console("evaluate", "--model", tmp_path / "ft", cwd=elsewhere))
    assert "f1" in printed
    evaluation = json.loads((tmp_path / "ft" / "evaluation.json").read_text())["metrics"]
    assert abs(evaluation["f1"] - metrics["validation"]["f1"]) < 1e-6

    # export: a flag for a tokenizer it has not, or a sentence-vector export, is refused
    # in one line, nothing written.
    one_line_error(console("export", "--model", tmp_path / "ft", "--task", "embedding",
                           "--output", elsewhere / "bad", cwd=elsewhere), "no sentence vectors")
    one_line_error(console("export", "--model", tmp_path / "ft", "--output",
                           elsewhere / "bad", "--truncate-at-nul", cwd=elsewhere),
                   "reads characters")
    assert not (elsewhere / "bad").exists()
    ok(console("export", "--model", tmp_path / "ft", "--output", elsewhere / "export" / "tagger",
               cwd=elsewhere))
    version = elsewhere / "export" / "tagger" / "1"
    info = json.loads((version / "assets.extra" / "export.json").read_text())
    assert info["input"] == {"type": "elmo_characters", "max_characters": 50}
    assert info["tokenizer"] is None and info["task_type"] == "tagging"
    assert (version / "assets.extra" / "tf_serving_warmup_requests").stat().st_size > 0

    # predict in a fresh process from the SavedModel alone.
    rows = [json.loads(line) for line in ok(console(
        "predict", "--saved-model", version, "--text", "Alice met Bob in Seoul .",
        cwd=tmp_path)).splitlines()]
    assert rows[0]["tokens"] == ["Alice", "met", "Bob", "in", "Seoul", "."]
    assert set(rows[0]["token_labels"]) <= {"B-LOC", "B-PER", "O"}

    # Only tensorflow + tensorflow_text: the served probabilities are the Keras model's.
    texts = ["Alice met Bob", "Seoul is big and Paris is big too , Bob", "", "Ωmega\x00 x"]
    served = json.loads(run_fresh(SERVE, version, json.dumps(texts)))
    import kerasbert

    model = kerasbert.load_model(str(tmp_path / "ft" / "model.keras"))
    words = [[w.decode() for w in row] for row in split_words(tf.constant(texts)).to_list()]
    expected = model.predict(words)
    for row, (probabilities, count) in enumerate(zip(served["token_probabilities"],
                                                     served["num_tokens"])):
        assert count == min(len(words[row]), 8)
        assert served["truncated"][row] == (len(words[row]) > 8)
        np.testing.assert_allclose(np.asarray(probabilities)[:count], expected[row][:count],
                                   atol=1e-5)


# 75 s: finetune, evaluate and export as fresh console-script processes, then a
# TensorFlow-only process; the default suite covers the pieces (see the tagging run above).
@slow_covered_by("tests/models/elmo/test_elmo_features.py::test_finetune_on_a_frozen_elmo_in_process",
                 "tests/models/elmo/test_elmo_tasks.py::test_classification_on_a_frozen_elmo",
                 "tests/models/elmo/test_elmo_runs.py::test_graph_char_ids_equal_python_ones_on_hostile_strings",
                 "tests/serving/test_export.py::test_export_model_trained_in_a_script")
def test_console_classification_run_evaluates_and_exports(tmp_path):
    elmo = _tiny_elmo(tmp_path)
    rows = [["a good film", "pos"], ["bad, bad plot", "neg"], ["good acting", "pos"],
            ["so bad", "neg"]] * 3
    train = write_csv(tmp_path / "train.csv", ["sentence", "label"], rows)
    ok(console("finetune", "--task", f"csv:{train}", "--preset", elmo, "--validation", train,
               "--output-dir", tmp_path / "ft", "--epochs", "1", "--batch-size", "4",
               "--max-seq-length", "6", "--no-progress", cwd=tmp_path))
    metrics = json.loads((tmp_path / "ft" / "metrics.json").read_text())["validation"]
    assert (tmp_path / "ft" / "confusion_matrix.png").is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ok(console("evaluate", "--model", tmp_path / "ft", "--split", train, cwd=elsewhere))
    evaluation = json.loads((tmp_path / "ft" / "evaluation.json").read_text())["metrics"]
    assert abs(evaluation["accuracy"] - metrics["accuracy"]) < 1e-6
    ok(console("export", "--model", tmp_path / "ft", "--output", elsewhere / "cls",
               cwd=elsewhere))
    texts = ["a good film", "so bad", "", "x" * 80]
    served = json.loads(run_fresh(SERVE, elsewhere / "cls" / "1", json.dumps(texts)))
    assert set(served["label"]) <= {"neg", "pos"}
    import kerasbert

    model = kerasbert.load_model(str(tmp_path / "ft" / "model.keras"))
    np.testing.assert_allclose(served["probabilities"], model.predict(texts), atol=1e-5)
