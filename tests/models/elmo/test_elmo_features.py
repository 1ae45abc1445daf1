"""ELMo's feature-based use from the command line: `kerasbert
extract-features` on a biLM directory (options.json + weights.hdf5) writes
each word's layers, equal to the backbone's own outputs; `kerasbert
finetune --freeze-backbone` classifies texts with validation metrics."""

import json

import numpy as np
import tensorflow as tf

from kerasbert.convert.elmo_weights import save_elmo
from kerasbert.models import ElmoBackbone
from kerasbert.text.elmo_characters import batch_char_ids
from kerasbert.text.elmo_words import texts_to_char_ids
from reliability.console import kerasbert as console
from reliability.console import ok
from reliability.console import one_line_error
from slow_marks import slow_covered_by

TINY = dict(lstm_dim=8, projection_dim=4, num_layers=2, num_highway=1,
            filters=[[1, 4], [2, 4]], max_characters_per_token=12)
LINES = ["ELMo reads characters, not pieces.", "", "서울은 크다", "東京"]


def test_words_and_char_ids_in_tensorflow_match_python():
    ids, mask, words = texts_to_char_ids(tf.constant(LINES), 12)
    assert words.to_list()[0] == [b"ELMo", b"reads", b"characters", b",", b"not", b"pieces",
                                  b"."]
    assert words.to_list()[3] == ["東".encode(), "京".encode()]  # one word per ideograph
    expected = batch_char_ids([[w.decode() for w in row] for row in words.to_list()], 12)
    np.testing.assert_array_equal(ids.numpy(), expected[0])
    np.testing.assert_array_equal(mask.numpy(), expected[1])


def test_extract_features_on_a_weight_directory_in_process(tmp_path, capsys):
    """`kerasbert extract-features` in this process (`main`): each word's
    layers equal the backbone's own outputs; a bad layer exits 2."""
    from kerasbert.cli import main

    backbone = ElmoBackbone(**TINY)
    save_elmo(backbone, tmp_path / "elmo")
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    assert main(["extract-features", "--preset", str(tmp_path / "elmo"), "--input",
                 str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.jsonl"),
                 "--layers", "-1,0", "--max-seq-length", "6"]) == 0
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["linex_index"] for r in records] == [0, 1, 2, 3]
    assert records[1]["features"] == []
    ids, mask, _ = texts_to_char_ids(tf.constant(LINES), 12, max_words=6)
    out = backbone({"input_char_ids": ids, "input_mask": mask})["encoder_outputs"]
    for row, record in enumerate(records):
        for k, feature in enumerate(record["features"]):
            for layer in feature["layers"]:
                np.testing.assert_allclose(layer["values"],
                                           np.asarray(out[layer["index"]])[row, k], atol=2e-6)
    capsys.readouterr()
    assert main(["extract-features", "--preset", str(tmp_path / "elmo"), "--input",
                 str(tmp_path / "in.txt"), "--output", str(tmp_path / "bad.jsonl"),
                 "--layers", "-4"]) == 2
    assert "-4" in capsys.readouterr().err
    assert not (tmp_path / "bad.jsonl").exists()


def test_finetune_on_a_frozen_elmo_in_process(tmp_path):
    """`kerasbert finetune --preset ELMO_DIR --freeze-backbone` in this
    process (`main`), without --vocab: the run reads characters, the biLM
    stays as the directory has it."""
    import kerasbert
    from kerasbert.cli import main
    from kerasbert.testing.files import write_csv

    backbone = ElmoBackbone(**TINY)
    save_elmo(backbone, tmp_path / "elmo")
    rows = [["a good film", "pos"], ["bad, bad plot", "neg"], ["good acting", "pos"],
            ["so bad", "neg"]]
    train = write_csv(tmp_path / "train.csv", ["sentence", "label"], rows)
    assert main(["finetune", "--task", f"csv:{train}", "--preset", str(tmp_path / "elmo"),
                 "--freeze-backbone", "--output-dir", str(tmp_path / "ft"), "--epochs", "1",
                 "--batch-size", "4", "--max-seq-length", "6", "--no-progress"]) == 0
    config = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert config["task_type"] == "classification" and config["label_names"] == ["neg", "pos"]
    assert config["input"]["type"] == "elmo_characters" and "tokenizer" not in config
    assert config["backbone"]["freeze_bilm"] is True
    model = kerasbert.load_model(str(tmp_path / "ft" / "model.keras"))
    np.testing.assert_array_equal(model.backbone.char_cnn.embeddings.numpy(),
                                  backbone.char_cnn.embeddings.numpy())


# 24 s: the same command as two fresh console-script processes; the default suite runs it
# in process.
@slow_covered_by("tests/models/elmo/test_elmo_features.py::test_extract_features_on_a_weight_directory_in_process")
def test_console_extract_features_on_a_weight_directory(tmp_path):
    backbone = ElmoBackbone(**TINY)
    save_elmo(backbone, tmp_path / "elmo")
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    printed = ok(console("extract-features", "--preset", tmp_path / "elmo", "--input",
                         tmp_path / "in.txt", "--output", tmp_path / "out.jsonl",
                         "--layers", "-1,0", "--max-seq-length", "6", cwd=tmp_path))
    assert "4 line(s)" in printed and "1 cut" in printed
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["linex_index"] for r in records] == [0, 1, 2, 3]
    assert records[1]["features"] == []
    assert [f["token"] for f in records[2]["features"]] == ["서울은", "크다"]
    ids, mask, _ = texts_to_char_ids(tf.constant(LINES), 12, max_words=6)
    out = backbone({"input_char_ids": ids, "input_mask": mask})["encoder_outputs"]
    for row, record in enumerate(records):
        for k, feature in enumerate(record["features"]):
            assert [layer["index"] for layer in feature["layers"]] == [-1, 0]
            for layer in feature["layers"]:
                np.testing.assert_allclose(layer["values"],
                                           np.asarray(out[layer["index"]])[row, k], atol=2e-6)
    one_line_error(console("extract-features", "--preset", tmp_path / "elmo", "--input",
                           tmp_path / "in.txt", "--output", tmp_path / "bad.jsonl",
                           "--layers", "-4", cwd=tmp_path), "-4")
    assert not (tmp_path / "bad.jsonl").exists()



# 31 s: a fresh console-script process, with a validation file scored; the default suite
# fine-tunes the same way in process and trains a classifier on a frozen biLM.
@slow_covered_by("tests/models/elmo/test_elmo_features.py::test_finetune_on_a_frozen_elmo_in_process",
                 "tests/models/elmo/test_elmo_tasks.py::test_classification_on_a_frozen_elmo")
def test_console_finetune_classification_on_a_frozen_elmo(tmp_path):
    from kerasbert.testing.files import write_csv

    save_elmo(ElmoBackbone(**TINY), tmp_path / "elmo")
    rows = [["a good film", "pos"], ["bad, bad plot", "neg"], ["good acting", "pos"],
            ["so bad", "neg"]] * 3
    train = write_csv(tmp_path / "train.csv", ["sentence", "label"], rows)
    ok(console("finetune", "--task", f"csv:{train}", "--preset", tmp_path / "elmo",
               "--freeze-backbone", "--validation", train, "--output-dir", tmp_path / "ft",
               "--epochs", "1", "--batch-size", "4", "--max-seq-length", "6", "--no-progress",
               cwd=tmp_path))
    metrics = json.loads((tmp_path / "ft" / "metrics.json").read_text())["validation"]
    assert {"accuracy", "f1", "majority_baseline_accuracy"} <= set(metrics)
    config = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert config["task_type"] == "classification" and config["label_names"] == ["neg", "pos"]


def test_console_commands_refuse_tokenizer_flags_on_a_character_model(tmp_path):
    """Issue 51: extract-features ran an ELMo folder with --vocab (ignored,
    rc 0) and embed failed with "Vocabulary file not found:"; both are one
    line, rc 2, nothing written."""
    save_elmo(ElmoBackbone(**TINY), tmp_path / "elmo")
    (tmp_path / "in.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    (tmp_path / "v.txt").write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nelmo\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    one_line_error(console("extract-features", "--preset", "elmo", "--vocab", "v.txt",
                           "--truncate-at-nul", "--input", "in.txt", "--output", "out.jsonl",
                           cwd=tmp_path),
                   "--vocab v.txt, --truncate-at-nul: elmo reads characters (ELMo)")
    one_line_error(console("embed", "--model", "elmo", "--input", "in.txt", "--output",
                           "out.npy", cwd=tmp_path),
                   "elmo reads characters (ELMo): it makes no sentence vectors")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
