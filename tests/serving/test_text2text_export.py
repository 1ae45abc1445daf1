"""text2text exports: source strings in, beam-searched target strings out,
the tokenizer and the decoding loop in the graph. The SavedModel runs in a
fresh process with only tensorflow + tensorflow_text and answers what the
model's own `generate` + detokenize answer in Python."""

import json
import os

import keras
import numpy as np
import pytest

from kerasbert.cli import main
from serving_fixtures import run_fresh
from serving_fixtures import write_vocab

SOURCES = ["the quick brown fox jumps over the lazy dog", "paris is a city in france", "",
           "naïve café — 東京 😀", "who lives near the river"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(export version directory, model, expected beam and greedy targets)."""
    from kerasbert.models import TransformerBackbone
    from kerasbert.preprocessing import Text2TextPreprocessor
    from kerasbert.tasks import Seq2SeqLM
    from kerasbert.text import load_tokenizer

    root = tmp_path_factory.mktemp("t2t-export")
    tokenizer = load_tokenizer(write_vocab(str(root)))
    keras.utils.set_random_seed(0)
    backbone = TransformerBackbone(vocabulary_size=tokenizer.vocabulary_size, num_layers=1,
                                   num_heads=2, hidden_dim=16, intermediate_dim=32,
                                   max_sequence_length=32, dropout=0.0)
    # Larger weights: the generated tokens then depend on the source.
    for weight in backbone.weights:
        weight.assign(np.asarray(weight.numpy()) * 3.0)
    model = Seq2SeqLM(backbone, preprocessor=Text2TextPreprocessor(tokenizer, 12,
                                                                  target_length=8))
    beam = model.preprocessor.generate(model, SOURCES)
    greedy = model.preprocessor.generate(model, SOURCES, strategy="greedy")
    result = model.export(str(root / "export" / "t2t"))
    return result["path"], model, beam, greedy


def test_export_layout_and_what_it_records(exported):
    path, _, beam, greedy = exported
    assert len(set(beam)) > 1 and len(set(greedy)) > 1  # outputs depend on the source
    assert os.path.isfile(os.path.join(path, "assets", "vocab.txt"))
    assert os.path.isfile(os.path.join(path, "assets.extra", "tf_serving_warmup_requests"))
    info = json.load(open(os.path.join(path, "assets.extra", "export.json"), encoding="utf-8"))
    assert info["task_type"] == "text2text" and info["inputs"] == ["source"]
    assert info["seq_length"] == 12
    assert info["decoding"] == {"strategy": "beam", "beam_size": 4, "length_penalty": 0.6,
                                "max_length": 8}
    assert info["outputs"] == ["target", "token_ids", "num_tokens"]
    ops = json.load(open(os.path.join(path, "assets.extra", "ops.json"), encoding="utf-8"))
    assert "TFText>FastWordpieceDetokenize" in ops["custom_ops"]
    # The decoding cache is written with core ops (TF Serving need not have XLA's).
    assert not [op for op in ops["custom_ops"] if op.startswith("Xla")], ops["custom_ops"]


def test_fresh_process_with_only_tensorflow_answers_as_generate(exported):
    path, model, beam, _ = exported
    encoded = model.preprocessor.dataset(SOURCES, batch_size=len(SOURCES))
    features = next(iter(encoded))
    ids = {k: features[k].numpy().tolist() for k in ("encoder_token_ids", "encoder_padding_mask")}
    served = json.loads(run_fresh("""
        loaded = tf.saved_model.load(sys.argv[1])
        out = loaded.signatures["serving_default"](source=tf.constant(json.loads(sys.argv[2])))
        ids = json.loads(sys.argv[3])
        by_ids = loaded.signatures["serve_token_ids"](
            **{k: tf.constant(v, tf.int32) for k, v in ids.items()})
        _check_imports()
        print(json.dumps({"target": [t.decode() for t in out["target"].numpy()],
                          "num_tokens": out["num_tokens"].numpy().tolist(),
                          "token_ids": out["token_ids"].numpy().tolist(),
                          "by_ids": by_ids["token_ids"].numpy().tolist()}))
    """, path, json.dumps(SOURCES), json.dumps(ids)).strip().splitlines()[-1])
    assert served["target"] == beam
    # Keras-native generation on raw text answers what the export answers.
    assert model.generate(SOURCES) == served["target"]
    assert served["by_ids"] == served["token_ids"]
    tokenizer = model.preprocessor.tokenizer
    for text, count, row in zip(served["target"], served["num_tokens"], served["token_ids"]):
        assert row[count:] == [0] * (len(row) - count) and 0 not in row[:count]
        assert tokenizer.detokenize(np.asarray([row[:count]])).numpy()[0].decode() == text


def test_sources_cut_to_the_longest_give_the_same_targets(exported):
    import tensorflow as tf

    from kerasbert.serving.text2text_serving import Text2TextServing

    _, model, beam, _ = exported
    tokenizer = model.preprocessor.tokenizer
    # `beam` came from the sources padded to the full length S = 12.
    cut = Text2TextServing(model, tokenizer, 12, options={"length_multiple": 2})
    features = next(iter(model.preprocessor.dataset(SOURCES[1:3], batch_size=2)))
    ids, mask = cut.trim_sources(features["encoder_token_ids"], features["encoder_padding_mask"])
    longest = int(features["encoder_padding_mask"].numpy().sum(-1).max())
    assert ids.shape[1] == mask.shape[1] == longest + longest % 2 < 12
    np.testing.assert_array_equal(ids.numpy(),
                                  features["encoder_token_ids"].numpy()[:, :ids.shape[1]])
    served = cut.serve({"source": tf.constant(SOURCES)})
    assert [t.decode() for t in served["target"].numpy()] == beam


def test_predict_command_names_the_source_flag(exported, capsys):
    # (test_predict_command_answers_as_generate runs `kerasbert predict` on it.)
    assert main(["predict", "--saved-model", exported[0], "--question", "x"]) == 2
    assert "This model's inputs are source: give --source (or --text)" in capsys.readouterr().err


def test_predict_command_answers_as_generate(exported, capsys):
    """`kerasbert predict --source ...` on the export: one row per source,
    the target `generate` gives (beam search), and its pieces."""
    path, _, beam, _ = exported
    capsys.readouterr()
    assert main(["predict", "--saved-model", path,
                 *[arg for s in SOURCES for arg in ("--source", s)]]) == 0
    printed = capsys.readouterr().out.strip().splitlines()
    rows = [json.loads(line) for line in printed[-len(SOURCES):]]
    assert [row["target"] for row in rows] == beam
    assert all(len(row["token_ids"]) == row["num_tokens"] for row in rows)


def test_generate_takes_raw_text_in_every_container(exported):
    import tensorflow as tf

    _, model, beam, greedy = exported
    assert model.generate(SOURCES) == beam
    assert model.generate(np.asarray(SOURCES)) == beam
    assert model.generate(tf.data.Dataset.from_tensor_slices(SOURCES).batch(2)) == beam
    assert model.generate(tf.data.Dataset.from_tensor_slices(SOURCES)) == beam  # unbatched
    assert model.generate(SOURCES[0]) == beam[0]  # a str for a str
    assert model.generate(SOURCES, strategy="greedy", batch_size=2) == greedy
    # ids in, ids out, as before
    features = next(iter(model.preprocessor.dataset(SOURCES[:2], batch_size=2)))
    ids = model.generate(features["encoder_token_ids"].numpy(),
                         features["encoder_padding_mask"].numpy(), max_length=8,
                         start_id=model.preprocessor.start_id, end_id=model.preprocessor.end_id)
    assert np.asarray(ids).shape == (2, 8)
    bare = type(model)(model.backbone)
    with pytest.raises(ValueError, match="needs a preprocessor"):
        bare.generate(["a b c"])


def test_no_batching_file_for_a_generating_model(exported):
    from kerasbert.serving.batching import PER_MODEL_FILENAME
    from kerasbert.serving.exporter import NO_BATCHING_FOR_GENERATION

    path = exported[0]
    info = json.load(open(os.path.join(path, "assets.extra", "export.json"), encoding="utf-8"))
    assert info["batching"] == {"file": None, "reason": NO_BATCHING_FOR_GENERATION}
    assert "encoder models" in info["batching"]["reason"]
    assert not os.path.exists(os.path.join(path, PER_MODEL_FILENAME))
    # The server-wide file beside models.config is not written either.
    root = os.path.dirname(os.path.dirname(path))
    open(os.path.join(root, "models.config"), "w").close()
    again = exported[1].export(os.path.join(root, "t2t"))
    assert again["batching_file"] is None
    assert not os.path.exists(os.path.join(root, "batching_parameters.txt"))
