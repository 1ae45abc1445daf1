"""`kerasbert export --task embedding`: strings -> sentence vectors in a
SavedModel that a fresh process serves with only tensorflow and
tensorflow_text, equal to the Keras SentenceEncoder; and the installed
console script end to end (export, then predict)."""

import json
import os

import numpy as np
import pytest

from kerasbert.testing.sentence_models import write_sentence_model
from reliability.console import kerasbert as console
from reliability.console import ok
from reliability.console import one_line_error
from serving_fixtures import run_fresh
from serving_fixtures import run_in_process
from slow_marks import slow_covered_by

TEXTS = ["The quick brown fox jumps over the lazy dog.", "hello world!", "",
         "a cat sat on the mat , and a dog sits on the rug . " * 3, "Dogs?"]
HOSTILE = ["   \t\n ", "x" * 100_000, "naïve café 東京 😀 \u200b", "[CLS] [SEP] [PAD]"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(version dir, Keras vectors of TEXTS) for a tiny max-pooling,
    normalised sentence-transformers folder; the folder is deleted after
    the export, so the SavedModel must be self-contained."""
    import shutil

    from kerasbert.serving.embedding_serving import export_embedding
    from kerasbert.tasks.sentence_encoder import SentenceEncoder
    from kerasbert.tasks.sentence_encoder import load_sentence_tokenizer

    root = tmp_path_factory.mktemp("embedding")
    folder, _, _ = write_sentence_model(str(root / "st"), ("max",), True, max_seq_length=16)
    encoder = SentenceEncoder.from_preset(folder)
    want = np.concatenate(list(encoder.embed(TEXTS, load_sentence_tokenizer(folder))))
    info = export_embedding(folder, str(root / "export" / "st"))
    shutil.rmtree(folder)
    return info, want


SERVE = """
import sys
path, texts, hostile = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
loaded = tf.saved_model.load(path)
serve = loaded.signatures["serving_default"]
out = {"inputs": sorted(serve.structured_input_signature[1]),
       "outputs": sorted(serve.structured_outputs)}
out["vectors"] = serve(text=tf.constant(texts))["embedding"].numpy().tolist()
for batch in (hostile, [], ["fine text"] * 300):
    got = serve(text=tf.constant(batch, tf.string))["embedding"].numpy()
    assert got.shape == (len(batch), 16) and np.isfinite(got).all(), got.shape
ids = {"input_word_ids": tf.constant([[2, 7, 8, 3, 0]]), "input_mask": tf.constant([[1, 1, 1, 1, 0]]),
       "input_type_ids": tf.zeros((1, 5), tf.int32)}
out["token_ids"] = sorted(loaded.signatures["serve_token_ids"](**ids))
_check_imports()
print(json.dumps(out))
"""


# 14 s: SERVE in a fresh process with only tensorflow + tensorflow_text; the
# default suite runs it on the same export in-process.
@slow_covered_by("tests/serving/test_embedding_export.py::test_served_vectors_equal_keras_in_process")
def test_served_vectors_equal_keras(exported):
    _check_served_vectors(exported, run_fresh)


def test_served_vectors_equal_keras_in_process(exported):
    """SERVE's checks, the script run in this process (`run_in_process`)."""
    _check_served_vectors(exported, run_in_process)


def _check_served_vectors(exported, runner):
    info, want = exported
    assert info["task_type"] == "embedding" and info["path"].endswith(os.path.join("st", "1"))
    out = json.loads(runner(SERVE, info["path"], json.dumps(TEXTS),
                            json.dumps(HOSTILE)).strip().splitlines()[-1])
    assert out["inputs"] == ["text"] and out["outputs"] == ["embedding"]
    assert out["token_ids"] == ["embedding"]
    got = np.array(out["vectors"], np.float32)
    difference = np.abs(got - want).max()
    print(f"served vs Keras: max difference {difference:.2e}")
    assert difference < 1e-5


def test_export_files(exported):
    info, _ = exported
    path = info["path"]
    assert os.path.isfile(os.path.join(path, "assets", "vocab.txt"))
    assert os.path.isfile(os.path.join(path, "assets.extra", "tf_serving_warmup_requests"))
    with open(os.path.join(path, "assets.extra", "export.json")) as f:
        meta = json.load(f)
    assert (meta["task_type"], meta["pooling"], meta["normalize"], meta["dimension"],
            meta["seq_length"]) == ("embedding", ["max"], True, 16, 16)
    assert meta["source"] == {"handle": "st"}  # never an absolute path


# 24 s: the installed console script, three fresh processes; the default
# suite runs `export --task embedding` and `predict` in-process.
@slow_covered_by("tests/serving/test_embedding_export.py::test_export_flags_and_errors",
                 "tests/serving/test_embedding_export.py::test_predict_command_on_the_export")
def test_console_script_export_and_predict(tmp_path):
    folder, _, _ = write_sentence_model(str(tmp_path / "st"), ("mean",), True, max_seq_length=16)
    out = tmp_path / "export" / "vectors"
    printed = ok(console("export", "--task", "embedding", "--model", folder, "--output", out,
                         cwd=tmp_path))
    assert "exported embedding model to" in printed
    rows = [json.loads(line) for line in ok(console(
        "predict", "--saved-model", out / "1", "--text", "hello world!", "--text", "",
        cwd=tmp_path)).strip().splitlines()[-2:]]
    vector = np.array(rows[0]["embedding"])
    assert vector.shape == (16,) and abs(np.linalg.norm(vector) - 1) < 1e-5
    one_line_error(console("export", "--task", "embedding", "--model", folder, "--output", out,
                           "--pooling", "median", cwd=tmp_path), "--pooling 'median'")


def test_predict_command_on_the_export(exported, tmp_path, capsys):
    """`kerasbert predict` on an embedding export, in this process: one
    unit-length vector per text (the empty text too); a pooling mode that
    does not exist is one line naming it."""
    from kerasbert.cli import main

    info, _ = exported
    assert main(["predict", "--saved-model", info["path"], "--text", "hello world!",
                 "--text", ""]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()[-2:]]
    for row in rows:
        vector = np.array(row["embedding"])
        assert vector.shape == (16,) and abs(np.linalg.norm(vector) - 1) < 1e-5
    folder, _, _ = write_sentence_model(str(tmp_path / "st"), ("mean",), True, max_seq_length=16)
    assert main(["export", "--task", "embedding", "--model", folder, "--output",
                 str(tmp_path / "out"), "--pooling", "median"]) == 2
    err = capsys.readouterr().err
    assert "--pooling 'median'" in err and len(err.strip().splitlines()) == 1


def test_export_flags_and_errors(tmp_path, capsys):
    from kerasbert.cli import main

    folder, _, _ = write_sentence_model(str(tmp_path / "st"), ("mean",), True, max_seq_length=16)
    out = tmp_path / "export" / "vectors"
    assert main(["export", "--task", "embedding", "--model", folder, "--output", str(out),
                 "--pooling", "cls", "--no-normalize", "--max-seq-length", "8"]) == 0
    with open(out / "1" / "assets.extra" / "export.json") as f:
        meta = json.load(f)
    assert (meta["pooling"], meta["normalize"], meta["seq_length"]) == (["cls"], False, 8)
    capsys.readouterr()
    for flags, message in (
            (["--model", str(tmp_path / "missing")], "missing"),
            (["--model", folder, "--version", "1"], "already exists"),
            (["--model", folder, "--max-seq-length", "99"], "24 positions")):
        assert main(["export", "--task", "embedding", "--output", str(out), *flags]) == 2
        assert message in capsys.readouterr().err
    # Embedding flags without --task embedding are refused.
    assert main(["export", "--model", folder, "--output", str(out), "--pooling", "max"]) == 2
    assert "--task embedding" in capsys.readouterr().err
    assert sorted(os.listdir(out)) == ["1"]


REAL = """
import sys
loaded = tf.saved_model.load(sys.argv[1])
vectors = loaded.signatures["serving_default"](text=tf.constant(json.loads(sys.argv[2])))
_check_imports()
print(json.dumps(vectors["embedding"].numpy().tolist()))
"""


# 27 s: exports the published 22M-parameter model and serves it in a fresh
# process; the default suite checks the same model's Keras vectors against
# NumPy and a tiny model's served vectors against Keras.
@slow_covered_by("tests/tasks/test_sentence_encoder.py::test_real_all_minilm_equals_numpy_reference",
                 "tests/serving/test_embedding_export.py::test_served_vectors_equal_keras_in_process")
def test_real_all_minilm_serves_its_vectors(published_minilm, tmp_path):
    """all-MiniLM-L6-v2 as published: served vectors equal the Keras
    encoder's (which equal a NumPy forward pass, tests/tasks/
    test_sentence_encoder.py) and are unit length."""
    from kerasbert.serving.embedding_serving import export_embedding
    from kerasbert.tasks.sentence_encoder import SentenceEncoder
    from kerasbert.tasks.sentence_encoder import load_sentence_tokenizer

    texts = ["A man is playing a guitar.", "", "naïve café 東京 😀",
             "Sentence embeddings map text to vectors. " * 40]
    info = export_embedding(str(published_minilm), str(tmp_path / "minilm"))
    encoder = SentenceEncoder.from_preset(str(published_minilm))
    want = np.concatenate(list(encoder.embed(texts, load_sentence_tokenizer(str(published_minilm)))))
    got = np.array(json.loads(run_fresh(REAL, info["path"], json.dumps(texts))
                              .strip().splitlines()[-1]), np.float32)
    difference = np.abs(got - want).max()
    print(f"all-MiniLM-L6-v2 served vs Keras: max difference {difference:.2e}")
    assert got.shape == (4, 384) and difference < 1e-5
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
