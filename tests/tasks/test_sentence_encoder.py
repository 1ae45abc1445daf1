"""SentenceEncoder on tiny sentence-transformers folders the test writes
(a Hugging Face BERT checkpoint in safetensors + the three files of the
`sentence-transformers` library), against two NumPy references: the same
pooling over our backbone's `sequence_output`, and the pooling over an
independent NumPy BERT forward pass of the checkpoint
(tests/convert/test_tf1_checkpoint.py's `reference_bert`). Also `kerasbert
embed` in process, and the real all-MiniLM-L6-v2 (the `published_minilm`
fixture)."""

import json
import os
import sys

import numpy as np
import pytest
from reliability.console import kerasbert as console
from reliability.console import ok
from reliability.console import one_line_error

import kerasbert
from kerasbert.cli import main
from kerasbert.errors import UsageError
from kerasbert.tasks.sentence_encoder import SentenceEncoder
from kerasbert.tasks.sentence_encoder import load_sentence_tokenizer
from kerasbert.testing.sentence_models import reference_pooling
from kerasbert.testing.sentence_models import write_sentence_files
from kerasbert.testing.sentence_models import write_sentence_model
from kerasbert.text import make_packer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "convert"))
from test_tf1_checkpoint import reference_bert  # noqa: E402

TEXTS = ["The quick brown fox jumps over the lazy dog.", "hello world!", "",
         "a cat sat on the mat , and a dog sits on the rug . " * 3, "Dogs?"]
TOLERANCE = 1e-5


def tf1_names(tensors, layers):
    """`transformers` names -> google-research/bert names (kernels [in, out])."""
    out = {"bert/embeddings/word_embeddings": tensors["embeddings.word_embeddings.weight"],
           "bert/embeddings/position_embeddings": tensors["embeddings.position_embeddings.weight"],
           "bert/embeddings/token_type_embeddings":
               tensors["embeddings.token_type_embeddings.weight"],
           "bert/embeddings/LayerNorm/gamma": tensors["embeddings.LayerNorm.weight"],
           "bert/embeddings/LayerNorm/beta": tensors["embeddings.LayerNorm.bias"],
           "bert/pooler/dense/kernel": tensors["pooler.dense.weight"].T,
           "bert/pooler/dense/bias": tensors["pooler.dense.bias"]}
    for i in range(layers):
        hf, tf1 = f"encoder.layer.{i}.", f"bert/encoder/layer_{i}/"
        for name in ("attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense", "intermediate.dense", "output.dense"):
            out[tf1 + name.replace(".", "/") + "/kernel"] = tensors[hf + name + ".weight"].T
            out[tf1 + name.replace(".", "/") + "/bias"] = tensors[hf + name + ".bias"]
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            out[tf1 + name.replace(".", "/") + "/gamma"] = tensors[hf + name + ".weight"]
            out[tf1 + name.replace(".", "/") + "/beta"] = tensors[hf + name + ".bias"]
    return out


def numpy_forward(tensors, config, inputs):
    """sequence_output [B, T, H] of the checkpoint, in float64 NumPy."""
    tf1_config = {k: config[k] for k in ("num_attention_heads", "hidden_size",
                                         "num_hidden_layers")}
    sequence, _ = reference_bert(tf1_names(tensors, config["num_hidden_layers"]), tf1_config,
                                 inputs["input_word_ids"], inputs["input_mask"],
                                 inputs["input_type_ids"])
    return sequence


def packed(tokenizer, texts, sequence_length):
    packer = make_packer(tokenizer, sequence_length)
    return {k: np.asarray(v, np.int32) for k, v in packer(tokenizer.tokenize_ids(texts)).items()}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """(directory, tensors, config) of a tiny mean + Normalize folder."""
    return write_sentence_model(str(tmp_path_factory.mktemp("st") / "tiny"), ("mean",), True,
                                max_seq_length=16)


def _variant(folder, tmp_path, pooling, normalize):
    """The folder's weights with other sentence-transformers files."""
    import shutil

    directory = str(tmp_path / "variant")
    shutil.copytree(folder[0], directory)
    write_sentence_files(directory, pooling, normalize, max_seq_length=16)
    return directory


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("pooling", [("mean",), ("cls",), ("max",)])
def test_vectors_equal_numpy_references(folder, tmp_path, pooling, normalize):
    directory = _variant(folder, tmp_path, pooling, normalize)
    encoder = SentenceEncoder.from_preset(directory)
    assert (encoder.pooling, encoder.normalize, encoder.sequence_length) == (
        pooling, normalize, 16)
    tokenizer = load_sentence_tokenizer(directory)
    got = np.concatenate(list(encoder.embed(TEXTS, tokenizer, batch_size=2)))
    assert got.dtype == np.float32 and got.shape == (len(TEXTS), 16)

    inputs = packed(tokenizer, TEXTS, 16)
    assert inputs["input_mask"].sum(1).max() == 16  # the long text is cut to max_seq_length
    ours = np.asarray(encoder.backbone(inputs)["sequence_output"])
    over_backbone = reference_pooling(ours, inputs["input_mask"], pooling, normalize)
    end_to_end = reference_pooling(numpy_forward(folder[1], folder[2], inputs),
                                   inputs["input_mask"], pooling, normalize)
    differences = (np.abs(got - over_backbone).max(), np.abs(got - end_to_end).max())
    print(f"{'+'.join(pooling)} normalize={normalize}: max |ours - NumPy pooling| "
          f"{differences[0]:.2e}, max |ours - NumPy BERT + pooling| {differences[1]:.2e}")
    assert max(differences) < TOLERANCE
    if normalize:
        np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-6)


def test_config_round_trip_and_keras_file(folder, tmp_path):
    encoder = SentenceEncoder.from_preset(folder[0])
    config = encoder.get_config()
    assert (config["pooling"], config["normalize"], config["sequence_length"]) == (
        ["mean"], True, 16)
    clone = SentenceEncoder.from_config(config)
    assert (clone.pooling, clone.normalize, clone.sequence_length) == (("mean",), True, 16)
    tokenizer = load_sentence_tokenizer(folder[0])
    inputs = packed(tokenizer, TEXTS, 16)
    path = str(tmp_path / "encoder.keras")
    encoder.save(path)
    loaded = kerasbert.load_model(path)
    assert isinstance(loaded, SentenceEncoder) and loaded.pooling == ("mean",)
    np.testing.assert_array_equal(np.asarray(loaded(inputs)), np.asarray(encoder(inputs)))


def test_other_handles_take_pooling_arguments(folder, tmp_path):
    import shutil

    plain = str(tmp_path / "plain")
    shutil.copytree(folder[0], plain)
    os.remove(os.path.join(plain, "modules.json"))  # a Hugging Face folder, no more
    encoder = SentenceEncoder.from_preset(plain)
    assert (encoder.pooling, encoder.normalize, encoder.sequence_length) == (
        ("mean",), False, None)
    encoder = SentenceEncoder.from_preset(plain, pooling="cls+max", normalize=True)
    assert encoder.pooling == ("cls", "max") and encoder.output_dim == 32
    # Arguments replace a folder's own settings.
    assert SentenceEncoder.from_preset(folder[0], pooling="max").pooling == ("max",)
    # A preset: random weights, the arguments decide.
    preset = SentenceEncoder.from_preset("bert_tiny", pooling="max",
                                         backbone_overrides={"vocabulary_size": 40})
    assert preset.output_dim == 128 and preset.sequence_length is None


def test_width_mismatch_and_lower_case(folder, tmp_path):
    import shutil

    directory = str(tmp_path / "wide")
    shutil.copytree(folder[0], directory)
    write_sentence_files(directory, embedding_dim=384)
    with pytest.raises(UsageError, match="word_embedding_dimension is 384 but the encoder's "
                       "width is 16"):
        SentenceEncoder.from_preset(directory)
    # sentence_bert_config.json's do_lower_case lower-cases even a cased tokenizer.
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": False}, f)
    write_sentence_files(directory, do_lower_case=False)
    assert not load_sentence_tokenizer(directory).lower_case
    write_sentence_files(directory, do_lower_case=True)
    assert load_sentence_tokenizer(directory).lower_case


# ------------------------------------------------------------ kerasbert embed


def test_embed_cli_writes_jsonl_and_npy(folder, tmp_path):
    """JSON lines from the installed console script, run in the input's
    folder; .npy and the flags that replace the folder's pooling in this
    process (`main`)."""
    source = tmp_path / "in.txt"
    source.write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    jsonl, npy = tmp_path / "v.jsonl", tmp_path / "v.npy"
    printed = ok(console("embed", "--model", folder[0], "--input", "in.txt", "--output",
                         "v.jsonl", "--batch-size", "2", cwd=tmp_path))
    assert "Wrote 5 vector(s) of dimension 16 (pooling mean, normalised, max_seq_length 16)" \
        in printed
    assert main(["embed", "--model", folder[0], "--input", str(source), "--output", str(npy),
                 "--batch-size", "2"]) == 0
    rows = np.array([json.loads(line) for line in jsonl.read_text().splitlines()], np.float32)
    array = np.load(npy)
    assert array.dtype == np.float32 and array.shape == (len(TEXTS), 16)
    np.testing.assert_array_equal(rows, array)  # '%.9g' keeps every float32 bit
    encoder = SentenceEncoder.from_preset(folder[0])
    want = np.concatenate(list(encoder.embed(TEXTS, load_sentence_tokenizer(folder[0]))))
    np.testing.assert_allclose(array, want, atol=1e-6)
    # Flags replace the folder's pooling; temporary files never stay behind.
    assert main(["embed", "--model", folder[0], "--input", str(source), "--output", str(npy),
                 "--pooling", "cls+mean", "--no-normalize", "--max-seq-length", "8"]) == 0
    assert np.load(npy).shape == (len(TEXTS), 32)
    assert sorted(os.listdir(tmp_path)) == ["in.txt", "v.jsonl", "v.npy"]


def test_embed_cli_errors(folder, tmp_path, capsys):
    out = tmp_path / "v.jsonl"
    assert main(["embed", "--model", folder[0], "--input", str(tmp_path / "nope.txt"),
                 "--output", str(out)]) == 2
    assert "--input" in capsys.readouterr().err
    blank = tmp_path / "blank.txt"
    blank.write_text("\n \n")  # two texts, both blank: two vectors, as promised
    assert main(["embed", "--model", folder[0], "--input", str(blank), "--output",
                 str(tmp_path / "blank.npy")]) == 0
    assert np.load(tmp_path / "blank.npy").shape == (2, 16)
    capsys.readouterr()
    good = tmp_path / "in.txt"
    good.write_text("hello\n")
    assert main(["embed", "--model", folder[0], "--input", str(good), "--output", str(out),
                 "--pooling", "median"]) == 2
    assert "--pooling 'median'" in capsys.readouterr().err
    assert main(["embed", "--model", folder[0], "--input", str(good), "--output", str(out),
                 "--max-seq-length", "64"]) == 2
    assert "24 positions" in capsys.readouterr().err
    assert not out.exists()


def test_embed_refusals_from_the_console(folder, tmp_path):
    """As a user meets them (installed script, fresh process): an --output
    that is a folder is refused before the model loads, a --vocab larger
    than the model's embedding in one line; nothing is written."""
    (tmp_path / "in.txt").write_text("hello\nworld\n")
    (tmp_path / "vectors").mkdir()
    result = console("embed", "--model", folder[0], "--input", "in.txt", "--output", "vectors",
                     cwd=tmp_path)
    one_line_error(result, "--output vectors is a folder")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(995)]
    (tmp_path / "big.txt").write_text("\n".join(words) + "\n")
    result = console("embed", "--model", folder[0], "--input", "in.txt", "--output", "v.npy",
                     "--vocab", "big.txt", cwd=tmp_path)
    one_line_error(result, "--vocab big.txt has 1000 tokens but the model's embedding has")
    assert sorted(os.listdir(tmp_path)) == ["big.txt", "in.txt", "vectors"]


# ------------------------------------------------ the real all-MiniLM-L6-v2


def test_real_all_minilm_equals_numpy_reference(published_minilm):
    # The package's folder (tests/conftest.py fetches it once; a skip names
    # the package and pip's reason when it cannot).
    directory = str(published_minilm)
    encoder = SentenceEncoder.from_preset(directory)
    assert (encoder.pooling, encoder.normalize, encoder.sequence_length) == (
        ("mean",), True, 256)
    tokenizer = load_sentence_tokenizer(directory)
    texts = ["The cat sat on the mat.", "A man is playing a guitar.", "",
             "Sentence embeddings map text to vectors. " * 40]
    got = np.concatenate(list(encoder.embed(texts, tokenizer)))
    inputs = packed(tokenizer, texts, 256)
    from safetensors.numpy import load_file

    tensors = load_file(os.path.join(directory, "model.safetensors"))
    tensors = {k[len("bert."):] if k.startswith("bert.") else k: v for k, v in tensors.items()}
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    # Row by row on its real tokens only (padding changes nothing there,
    # and the NumPy pass is then a third of the work).
    want = np.concatenate([
        reference_pooling(numpy_forward(tensors, config, {k: v[i:i + 1, :n]
                                                          for k, v in inputs.items()}),
                          inputs["input_mask"][i:i + 1, :n], ("mean",), True)
        for i, n in enumerate(inputs["input_mask"].sum(axis=1))])
    difference = np.abs(got - want).max()
    print(f"all-MiniLM-L6-v2: max |ours - NumPy BERT + mean + normalize| {difference:.2e}")
    assert difference < TOLERANCE
    # Paraphrases are nearer than unrelated text (the vectors are unit length).
    close = np.concatenate(list(encoder.embed(["A cat sits on a mat."], tokenizer)))
    assert float(close[0] @ got[0]) > float(close[0] @ got[1]) + 0.3
