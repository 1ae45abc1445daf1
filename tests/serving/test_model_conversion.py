"""`kerasbert convert --to hf|keras-hub|tf1|tf-hub`: each layout is read back
by the library it is for (keras-hub's `from_preset` for hf and keras-hub
directories, tensorflow for the TF Hub pair) and by our own handles, and
gives the source model's outputs."""

import json
import os
import sys

import keras
import numpy as np
import pytest
from reliability.console import kerasbert
from reliability.console import ok

from kerasbert import runs
from kerasbert.errors import UsageError
from kerasbert.models import Backbone
from kerasbert.models import BertBackbone
from kerasbert.models import DistilBertBackbone
from kerasbert.models import RobertaBackbone
from kerasbert.serving.model_conversion import convert_model
from kerasbert.testing.files import write_vocabulary
from kerasbert.testing.fixtures import tiny_encoder_config
from kerasbert.testing.fixtures import tiny_encoder_inputs
from kerasbert.text import load_tokenizer

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(45)]


def _randomize(model, seed):
    rng = np.random.default_rng(seed)
    for w in model.weights:
        w.assign(rng.normal(0, 0.2, w.shape).astype("float32")
                 + (1.0 if "gamma" in w.path else 0.0))
    return model


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("conversion")
    write_vocabulary(root / "vocab.txt", WORDS)
    # The tanh GELU of the original BERT: keras-hub's BERT has no other.
    backbone = _randomize(BertBackbone(**tiny_encoder_config(), activation="gelu_approximate"),
                          seed=11)
    runs.save_run(str(root / "run"), {runs.BACKBONE: backbone},
                  tokenizer=load_tokenizer(str(root / "vocab.txt"), lower_case=False))
    return root / "run", backbone


def _outputs(model, inputs):
    return {k: keras.ops.convert_to_numpy(v) for k, v in model(inputs).items()
            if k in ("sequence_output", "pooled_output")}


def _hub_inputs(inputs):
    return {"token_ids": inputs["input_word_ids"], "padding_mask": inputs["input_mask"],
            "segment_ids": inputs["input_type_ids"]}


@pytest.mark.parametrize("to", ["hf", "keras-hub", "tf1", "tf-hub"])
def test_every_layout_reads_back_with_the_same_outputs(tmp_path, run_dir, to):
    import keras_hub

    run, source = run_dir
    inputs = tiny_encoder_inputs()
    expected = _outputs(source, inputs)
    # "cased_...": how a google-research/bert directory says it is cased.
    out = convert_model(str(run), to, tmp_path / "cased_out")
    handle = os.path.join(out, "encoder") if to == "tf-hub" else out
    ours = _outputs(Backbone.from_preset(handle), inputs)
    for key in expected:
        np.testing.assert_allclose(ours[key], expected[key], atol=1e-5, err_msg=key)
    assert load_tokenizer(handle).lower_case is False  # the run's casing travels
    if to in ("hf", "keras-hub"):
        peer = keras_hub.models.BertBackbone.from_preset(out)
        got = peer(_hub_inputs(inputs))
        for key in expected:
            np.testing.assert_allclose(keras.ops.convert_to_numpy(got[key]), expected[key],
                                       atol=1e-5, err_msg=key)
        tokenizer = keras_hub.models.BertTokenizer.from_preset(out)
        assert tokenizer.vocabulary_size() == len(WORDS)
    if to == "hf":
        config = json.loads(open(os.path.join(out, "config.json")).read())
        assert config["model_type"] == "bert" and config["hidden_size"] == 16


def test_refusals(tmp_path, run_dir):
    run, _ = run_dir
    with pytest.raises(UsageError, match="--to 'onnx'"):
        convert_model(str(run), "onnx", tmp_path / "x")
    (tmp_path / "exists").mkdir()
    with pytest.raises(UsageError, match="already exists"):
        convert_model(str(run), "hf", tmp_path / "exists")
    erf = BertBackbone(**tiny_encoder_config())
    erf.save(str(tmp_path / "erf.keras"))
    with pytest.raises(UsageError, match="tanh-approximate GELU"):
        convert_model(str(tmp_path / "erf.keras"), "keras-hub", tmp_path / "z",
                      vocab=str(run / "vocab.txt"))
    roberta = RobertaBackbone(**tiny_encoder_config())
    roberta.save(str(tmp_path / "roberta.keras"))
    with pytest.raises(UsageError, match="--to tf1 writes google-research/bert's BERT layout"):
        convert_model(str(tmp_path / "roberta.keras"), "tf1", tmp_path / "y",
                      vocab=str(run / "vocab.txt"))
    distil = DistilBertBackbone(**tiny_encoder_config(layer_norm_epsilon=1e-6))
    distil.save(str(tmp_path / "distil.keras"))
    with pytest.raises(UsageError, match="fixes layer_norm_epsilon=1e-12; this backbone uses 1e-06"):
        convert_model(str(tmp_path / "distil.keras"), "hf", tmp_path / "w",
                      vocab=str(run / "vocab.txt"))
    assert not any((tmp_path / name).exists() for name in ("w", "x", "y", "z"))


def test_cli_converts(tmp_path, run_dir, capsys):
    """`kerasbert convert --to hf` as the installed console script, from
    another folder: the written directory reads back with the run's
    outputs. A second run onto it (in this process, `main`) exits 2 with
    one line."""
    from kerasbert.cli import main

    run, source = run_dir
    ok(kerasbert("convert", "--model", run, "--to", "hf", "--output", "hf", cwd=tmp_path))
    inputs = tiny_encoder_inputs()
    np.testing.assert_allclose(_outputs(Backbone.from_preset(str(tmp_path / "hf")),
                                        inputs)["pooled_output"],
                               _outputs(source, inputs)["pooled_output"], atol=1e-5)
    capsys.readouterr()
    argv = ["convert", "--model", str(run), "--to", "hf", "--output", str(tmp_path / "hf")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "Traceback" not in err


def test_roberta_to_hf_reads_back_in_keras_hub_and_ours(tmp_path):
    """RoBERTa's Hugging Face layout: two offset rows before the positions,
    a one-row token-type table, vocab.json + merges.txt."""
    import keras_hub

    sys.path.insert(0, os.path.dirname(__file__))
    from serving_fixtures import write_tokenizer

    from kerasbert import runs

    bpe = write_tokenizer(str(tmp_path / "bpe"), "bpe")
    tokenizer = load_tokenizer(bpe)
    source = _randomize(RobertaBackbone(**tiny_encoder_config(
        vocabulary_size=tokenizer.vocabulary_size)), seed=12)
    runs.save_run(str(tmp_path / "run"), {runs.BACKBONE: source}, tokenizer=tokenizer)
    out = convert_model(str(tmp_path / "run"), "hf", tmp_path / "hf")
    assert sorted(n for n in os.listdir(out) if n != "model.safetensors") == [
        "config.json", "merges.txt", "vocab.json"]
    inputs = tiny_encoder_inputs(vocabulary_size=tokenizer.vocabulary_size, segments=False)
    expected = _outputs(source, inputs)["sequence_output"]
    ours = _outputs(Backbone.from_preset(out), inputs)["sequence_output"]
    np.testing.assert_allclose(ours, expected, atol=1e-5)
    peer = keras_hub.models.RobertaBackbone.from_preset(out)
    got = peer({"token_ids": inputs["input_word_ids"], "padding_mask": inputs["input_mask"]})
    np.testing.assert_allclose(keras.ops.convert_to_numpy(got), expected, atol=1e-5)
    assert load_tokenizer(out).vocabulary_size == tokenizer.vocabulary_size


@pytest.mark.parametrize("family, extra", [("DistilBertBackbone", {}),
                                           ("ElectraBackbone", {"embedding_dim": 8})])
def test_distilbert_and_electra_to_hf_read_back(tmp_path, run_dir, family, extra):
    """DistilBERT (under "distilbert.", read back by keras-hub's converter
    too) and ELECTRA (under "electra.", with embeddings_project)."""
    import keras_hub

    import kerasbert.models as families

    run, _ = run_dir
    source = _randomize(getattr(families, family)(**tiny_encoder_config(**extra)), seed=13)
    source.save(str(tmp_path / "model.keras"))
    out = convert_model(str(tmp_path / "model.keras"), "hf", tmp_path / "hf",
                        vocab=str(run / "vocab.txt"))
    segments = family != "DistilBertBackbone"
    inputs = tiny_encoder_inputs(segments=segments)
    expected = _outputs(source, inputs)["sequence_output"]
    loaded = Backbone.from_preset(out)
    assert type(loaded) is type(source)
    np.testing.assert_allclose(_outputs(loaded, inputs)["sequence_output"], expected, atol=1e-5)
    if family == "DistilBertBackbone":
        peer = keras_hub.models.DistilBertBackbone.from_preset(out)
        got = peer({"token_ids": inputs["input_word_ids"], "padding_mask": inputs["input_mask"]})
        np.testing.assert_allclose(keras.ops.convert_to_numpy(got), expected, atol=1e-5)


def test_albert_to_hf_reads_back_in_keras_hub_and_ours(tmp_path):
    """ALBERT: groups of distinct blocks, the factorised embedding's
    projection, spiece.model; keras-hub's converter reads it back."""
    import keras_hub

    sys.path.insert(0, os.path.dirname(__file__))
    from serving_fixtures import write_tokenizer

    from kerasbert.models import AlbertBackbone

    spm = write_tokenizer(str(tmp_path / "spm"), "sentencepiece")
    tokenizer = load_tokenizer(spm)
    source = _randomize(AlbertBackbone(**tiny_encoder_config(
        vocabulary_size=tokenizer.vocabulary_size, embedding_dim=8, num_groups=2,
        activation="gelu_approximate")), seed=14)
    source.save(str(tmp_path / "albert.keras"))
    out = convert_model(str(tmp_path / "albert.keras"), "hf", tmp_path / "hf", vocab=spm)
    assert os.path.isfile(os.path.join(out, "spiece.model"))
    inputs = tiny_encoder_inputs(vocabulary_size=tokenizer.vocabulary_size)
    expected = _outputs(source, inputs)
    loaded = Backbone.from_preset(out)
    assert loaded.get_config()["num_groups"] == 2
    for key, value in _outputs(loaded, inputs).items():
        np.testing.assert_allclose(value, expected[key], atol=1e-5, err_msg=key)
    peer = keras_hub.models.AlbertBackbone.from_preset(out)
    got = peer({"token_ids": inputs["input_word_ids"], "padding_mask": inputs["input_mask"],
                "segment_ids": inputs["input_type_ids"]})
    np.testing.assert_allclose(keras.ops.convert_to_numpy(got["sequence_output"]),
                               expected["sequence_output"], atol=1e-5)
    assert load_tokenizer(out).vocabulary_size == tokenizer.vocabulary_size


def test_big_bird_to_hf_reads_back(tmp_path):
    """BigBird: BERT's names under "bert.", its attention settings in
    config.json, spiece.model."""
    sys.path.insert(0, os.path.dirname(__file__))
    from serving_fixtures import write_tokenizer

    from kerasbert.models import BigBirdBackbone

    spm = write_tokenizer(str(tmp_path / "spm"), "sentencepiece")
    size = load_tokenizer(spm).vocabulary_size
    source = _randomize(BigBirdBackbone(**tiny_encoder_config(
        vocabulary_size=size, max_sequence_length=16, block_size=2, num_random_blocks=1)),
        seed=15)
    source.save(str(tmp_path / "bigbird.keras"))
    out = convert_model(str(tmp_path / "bigbird.keras"), "hf", tmp_path / "hf", vocab=spm,
                        lower_case=False)
    config = json.loads(open(os.path.join(out, "config.json")).read())
    assert (config["model_type"], config["attention_type"], config["block_size"]) == (
        "big_bird", "block_sparse", 2)
    loaded = Backbone.from_preset(out)
    assert loaded.get_config() == {**source.get_config(), "name": loaded.name}
    inputs = tiny_encoder_inputs(vocabulary_size=size, length=16)
    for key, value in _outputs(loaded, inputs).items():
        np.testing.assert_allclose(value, _outputs(source, inputs)[key], atol=1e-5, err_msg=key)
    assert load_tokenizer(out).lower_case is False
