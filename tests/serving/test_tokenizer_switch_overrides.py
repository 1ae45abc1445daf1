"""The tokenizer switches on the commands that take a tokenizer they did
not train: `export` (over a fine-tuned run's setting), `export --task
embedding`, `export-hub` and `embed` (over the source's).

`--truncate-at-nul`: on, a text with a NUL character gets what the text
before the NUL gets (keras-hub's ids); off (every default here), the rest
of the text still counts. Checked on what the SavedModels serve and on the
vectors `embed` writes, and on the setting each export records.
`--exact-unigram` reaches a SentencePiece run's export (its ids are
tests/text's)."""

import json
import os

import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the graph's tokenizer ops)
from serving_fixtures import make_finetuned_dir
from serving_fixtures import tiny_backbone
from serving_fixtures import write_vocab

from kerasbert import cli
from kerasbert.testing.sentence_models import write_sentence_model

CUT = "paris is a big city"
WITH_NUL = CUT + "\x00 london river bank who what"


def export_json(version_dir):
    with open(os.path.join(version_dir, "assets.extra", "export.json")) as f:
        return json.load(f)


def served(version_dir, output):
    serve = tf.saved_model.load(version_dir).signatures["serving_default"]
    return serve(text=tf.constant([CUT, WITH_NUL]))[output].numpy()


def test_export_overrides_the_runs_setting(tmp_path):
    ft = make_finetuned_dir(str(tmp_path / "ft"), "classification", sequence_length=16)
    assert cli.main(["export", "--model", ft, "--output", str(tmp_path / "out"),
                     "--truncate-at-nul"]) in (0, None)
    version = str(tmp_path / "out" / "1")
    assert export_json(version)["truncate_at_nul"] is True
    cut, with_nul = served(version, "probabilities")
    np.testing.assert_array_equal(cut, with_nul)


def test_embedding_export_and_embed_take_the_switch(tmp_path):
    folder, _, _ = write_sentence_model(str(tmp_path / "st"), ("mean",), True, max_seq_length=16)
    out = str(tmp_path / "serve")
    assert cli.main(["export", "--task", "embedding", "--model", folder, "--output", out,
                     "--truncate-at-nul"]) in (0, None)
    assert export_json(os.path.join(out, "1"))["truncate_at_nul"] is True
    cut, with_nul = served(os.path.join(out, "1"), "embedding")
    np.testing.assert_array_equal(cut, with_nul)

    texts = tmp_path / "texts.txt"
    texts.write_text(f"{CUT}\n{WITH_NUL}\n", encoding="utf-8")
    for name, flags in (("on", ["--truncate-at-nul"]), ("off", [])):
        vectors = str(tmp_path / f"vectors_{name}.npy")
        assert cli.main(["embed", "--model", folder, "--input", str(texts),
                         "--output", vectors, *flags]) in (0, None)
        written = np.load(vectors)
        assert bool(np.abs(written[0] - written[1]).max() == 0) is (name == "on")
    # The SavedModel and the Python path agree.
    np.testing.assert_allclose(np.load(str(tmp_path / "vectors_on.npy")),
                               np.stack([cut, with_nul]), atol=1e-5)


def test_export_hub_preprocessor_takes_the_switch(tmp_path):
    import keras

    vocab = write_vocab(str(tmp_path))
    backbone = tiny_backbone(len(open(vocab, encoding="utf-8").read().split()))
    path = str(tmp_path / "backbone.keras")
    backbone.save(path)
    keras.backend.clear_session()
    out = str(tmp_path / "hub")
    assert cli.main(["export-hub", "--backbone", path, "--vocab", vocab, "--output", out,
                     "--no-mlm", "--seq-length", "16", "--truncate-at-nul"]) in (0, None)
    preprocess = tf.saved_model.load(os.path.join(out, "preprocess"))
    ids = preprocess(tf.constant([CUT, WITH_NUL]))["input_word_ids"].numpy()
    np.testing.assert_array_equal(ids[0], ids[1])


def test_exact_unigram_overrides_a_sentencepiece_runs_setting(tmp_path):
    ft = make_finetuned_dir(str(tmp_path / "ft"), "classification", sequence_length=16,
                            family="AlbertBackbone", tokenizer="sentencepiece")
    assert cli.main(["export", "--model", ft, "--output", str(tmp_path / "out"),
                     "--exact-unigram"]) in (0, None)
    info = export_json(str(tmp_path / "out" / "1"))
    assert info["exact_unigram"] is True and info["truncate_at_nul"] is False
    cut, with_nul = served(str(tmp_path / "out" / "1"), "probabilities")
    assert np.isfinite(cut).all() and not np.array_equal(cut, with_nul)


def test_only_the_switches_given_override():
    import argparse

    from kerasbert.commands import export
    from kerasbert.commands._args import tokenizer_switches

    parser = export.add_arguments(argparse.ArgumentParser())
    given = parser.parse_args(["--model", "m", "--output", "o", "--truncate-at-nul",
                               "--no-special-tokens-in-strings", "--exact-unigram"])
    assert tokenizer_switches(given) == {"truncate_at_nul": True, "exact_unigram": True,
                                         "special_tokens_in_strings": False}
    assert tokenizer_switches(parser.parse_args(["--model", "m", "--output", "o"])) == {}
