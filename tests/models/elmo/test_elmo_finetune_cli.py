"""`kerasbert finetune` on an ELMo biLM directory: no --vocab, the
feature-based use (`--freeze-backbone`: the biLM stays as loaded, the head
and the scalar mix train), each epoch scored on the validation words, a run
directory whose model tags raw words."""

import json

import keras
import numpy as np

import kerasbert
from kerasbert.convert.elmo_weights import save_elmo
from kerasbert.models import ElmoBackbone
from kerasbert.testing.files import write_jsonl
from reliability.console import in_process
from reliability.console import kerasbert as console
from reliability.console import ok
from reliability.console import one_line_error
from slow_marks import slow_covered_by

TINY = dict(lstm_dim=8, projection_dim=4, num_layers=2, num_highway=1,
            filters=[[1, 4], [2, 4]], max_characters_per_token=12)


def _tagging_records():
    rows = [(["Alice", "met", "Bob"], ["B-PER", "O", "B-PER"]),
            (["Bob", "saw", "Paris"], ["B-PER", "O", "B-LOC"]),
            (["Seoul", "is", "big"], ["B-LOC", "O", "O"])]
    return [{"tokens": words, "labels": tags} for words, tags in rows * 4]


# 40 s: tagging through fresh console-script processes, each epoch scored on validation
# words; the default suite fine-tunes an ELMo directory in process and fits a tagger on a
# frozen biLM.
@slow_covered_by("tests/models/elmo/test_elmo_features.py::test_finetune_on_a_frozen_elmo_in_process",
                 "tests/models/elmo/test_elmo_tasks.py::test_tagging_on_a_frozen_elmo")
def test_console_finetune_tagging_on_a_frozen_elmo(tmp_path):
    backbone = ElmoBackbone(**TINY)
    save_elmo(backbone, tmp_path / "elmo")
    train = write_jsonl(tmp_path / "train.jsonl", _tagging_records())
    valid = write_jsonl(tmp_path / "valid.jsonl", _tagging_records()[:3])
    printed = ok(console("finetune", "--task", f"jsonl:{train}", "--task-type", "tagging",
                         "--preset", tmp_path / "elmo", "--freeze-backbone", "--output-dir",
                         tmp_path / "ft", "--validation", valid, "--epochs", "2",
                         "--batch-size", "4", "--learning-rate", "3e-3", "--max-seq-length", "8",
                         "--no-progress", cwd=tmp_path))
    assert "fine-tuned a tagging model" in printed
    config = json.loads((tmp_path / "ft" / "config.json").read_text())
    assert config["backbone"]["freeze_bilm"] is True and config["max_seq_length"] == 8
    metrics = json.loads((tmp_path / "ft" / "metrics.json").read_text())
    assert {"f1", "precision", "recall"} <= set(metrics["validation"])
    assert len(metrics["history"]["dev_f1"]) == 2  # each epoch scored, the best kept
    model = kerasbert.load_model(str(tmp_path / "ft" / "model.keras"))
    # The biLM is the file's (frozen); the model tags raw words.
    np.testing.assert_array_equal(model.backbone.char_cnn.embeddings.numpy(),
                                  backbone.char_cnn.embeddings.numpy())
    assert [w.path for w in model.backbone.trainable_weights] == [
        "scalar_mix/mix_weights", "scalar_mix/gamma"]
    probabilities = model.predict([["Alice", "saw", "Seoul"]])
    assert probabilities[0].shape == (3, 3)
    keras.backend.clear_session()
    # Token-id features are refused in one line, before anything is written.
    one_line_error(console("finetune", "--features", tmp_path, "--preset", tmp_path / "elmo",
                           "--output-dir", tmp_path / "ft2", cwd=tmp_path), "--features")
    assert not (tmp_path / "ft2").exists()


def test_freeze_backbone_on_a_bert(tmp_path):
    # The flag is every family's: a BERT's encoder stays as loaded too (the
    # command in process: the ELMo runs above are the console-script ones).
    from kerasbert.models import BertBackbone
    from kerasbert.testing.files import write_csv

    words = ["good", "bad", "film", "plot", "very", "."]
    (tmp_path / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words) + "\n")
    backbone = BertBackbone(vocabulary_size=11, num_layers=1, num_heads=2, hidden_dim=16,
                            intermediate_dim=32, max_sequence_length=16)
    backbone.save(tmp_path / "backbone.keras")
    rows = [["very good film .", "pos"], ["bad plot .", "neg"]] * 4
    train = write_csv(tmp_path / "train.csv", ["sentence", "label"], rows)
    ok(in_process("finetune", "--task", f"csv:{train}", "--backbone",
                  tmp_path / "backbone.keras", "--vocab", tmp_path / "vocab.txt",
                  "--freeze-backbone", "--output-dir", tmp_path / "ft", "--epochs", "1",
                  "--batch-size", "4", "--max-seq-length", "8", "--no-progress"))
    model = kerasbert.load_model(str(tmp_path / "ft" / "model.keras"))
    assert not model.backbone.trainable
    for before, after in zip(backbone.get_weights(), model.backbone.get_weights()):
        np.testing.assert_array_equal(before, after)
    assert len(model.trainable_weights) == 2  # the classifier's kernel and bias
