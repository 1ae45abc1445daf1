"""`kerasbert extract-features` and `extract_features`: per-token vectors of
chosen encoder layers, checked against the backbone's own encoder_outputs."""

import json
import os

import keras
import numpy as np
import pytest

from kerasbert.cli import main
from kerasbert.models import BertBackbone
from kerasbert.data.feature_extraction import extract_features, parse_line
from kerasbert.text import WordPieceTokenizer
from kerasbert.text.packer import BertPacker

T = 12
WORDS = "the cat sat on mat dog ran to river paris is capital of france 중 国 ##s".split()
LINES = [
    "The cat sat on the mat",
    "paris is the capital of france ||| the dog ran",
    "",
    "the cat sat on the mat the dog ran to the river the cat",  # 15 pieces: truncated.
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("extract")
    vocab = root / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS) + "\n", encoding="utf-8")
    keras.utils.set_random_seed(7)
    backbone = BertBackbone(vocabulary_size=len(WORDS) + 5, num_layers=2, num_heads=2, hidden_dim=8,
                            intermediate_dim=16, max_sequence_length=16, dropout=0.0)
    path = root / "backbone.keras"
    backbone.save(str(path))
    source = root / "input.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return root, str(vocab), str(path), str(source), backbone


def _direct(backbone, tokenizer, text):
    """encoder_outputs computed directly for one line: (tokens, [L arrays [n, H]])."""
    packer = BertPacker.from_tokenizer(tokenizer, T)
    parsed = parse_line(text)
    a, b = parsed if isinstance(parsed, tuple) else (parsed, None)
    x = packer(tokenizer.tokenize_ids([a]), None if b is None else tokenizer.tokenize_ids([b]))
    n = int(x["input_mask"].numpy().sum())
    out = backbone({k: v.numpy() for k, v in x.items()}, training=False)["encoder_outputs"]
    tokens = [tokenizer.vocabulary[i] for i in x["input_word_ids"].numpy()[0, :n]]
    return tokens, [keras.ops.convert_to_numpy(layer)[0, :n] for layer in out], x["input_type_ids"].numpy()[0, :n]


def test_cli_matches_encoder_outputs(setup, capsys):
    root, vocab, path, source, backbone = setup
    output = str(root / "out" / "features.jsonl")
    argv = ["extract-features", "--backbone", path, "--vocab", vocab, "--input", source,
            "--layers", "-1,0", "--max-seq-length", str(T), "--batch-size", "3", "--output", output]
    assert main(argv) == 0, capsys.readouterr().err
    assert "Wrote features of 4 line(s)" in capsys.readouterr().out
    records = [json.loads(line) for line in open(output, encoding="utf-8")]
    assert [r["linex_index"] for r in records] == [0, 1, 2, 3]
    assert not [n for n in os.listdir(os.path.dirname(output)) if n.endswith(".tmp")]
    tokenizer = WordPieceTokenizer(vocab)
    for text, record in zip(LINES, records):
        tokens, layers, _ = _direct(backbone, tokenizer, text)
        assert [f["token"] for f in record["features"]] == tokens
        for position, feature in enumerate(record["features"]):
            assert [layer["index"] for layer in feature["layers"]] == [-1, 0]
            for layer in feature["layers"]:
                values = np.asarray(layer["values"])
                assert values.shape == (8,)
                np.testing.assert_allclose(values, layers[layer["index"]][position], atol=2e-6)
                assert all(round(v, 6) == v for v in layer["values"])
    assert records[1]["features"][7]["token"] == "[SEP]" and records[1]["features"][-1]["token"] == "[SEP]"
    assert [f["token"] for f in records[2]["features"]] == ["[CLS]", "[SEP]"]
    assert len(records[3]["features"]) == T


def test_pure_function_pairs_and_truncation(setup):
    _, vocab, _, _, backbone = setup
    tokenizer = WordPieceTokenizer(vocab)
    stats = {}
    texts = [("paris is the capital", "the dog ran"), "the cat sat on the mat the dog ran to the river the cat"]
    records = list(extract_features(backbone, tokenizer, texts, [-2], T, batch_size=1, stats=stats))
    assert stats == {"num_texts": 2, "truncated": 1}
    tokens, layers, types = _direct(backbone, tokenizer, "paris is the capital ||| the dog ran")
    assert [f["token"] for f in records[0]["features"]] == tokens
    assert list(types) == [0] * 6 + [1] * 4
    got = np.asarray([f["layers"][0]["values"] for f in records[0]["features"]])
    np.testing.assert_allclose(got, layers[-2], atol=2e-6)
    assert parse_line("a ||| b ||| c\n") == ("a ||| b", "c")  # The LAST separator, as the original.


@pytest.mark.parametrize("layers, message", [
    ("-1,2", "Layer index(es) 2 out of range: the backbone has 2 layers (valid: -2..1"),
    ("-3", "Layer index(es) -3 out of range"),
    ("top", "--layers 'top': expected comma-separated integers"),
])
def test_bad_layers_exit_2(setup, capsys, layers, message):
    root, vocab, path, source, _ = setup
    output = str(root / "bad.jsonl")
    assert main(["extract-features", "--backbone", path, "--vocab", vocab, "--input", source,
                 "--layers", layers, "--max-seq-length", str(T), "--output", output]) == 2
    assert message in capsys.readouterr().err
    assert not os.path.exists(output)


def test_max_seq_length_above_positions_exits_2(setup, capsys):
    root, vocab, path, source, _ = setup
    assert main(["extract-features", "--backbone", path, "--vocab", vocab, "--input", source,
                 "--layers", "-1", "--output", str(root / "x.jsonl")]) == 2  # Default T 128 > 16.
    assert "max_seq_length 128 is above the backbone's 16 positions" in capsys.readouterr().err


def test_preset_with_original_checkpoint(setup, tmp_path, capsys):
    from kerasbert.convert.tf1_checkpoint import save_bert_checkpoint

    _, vocab, _, source, _ = setup
    keras.utils.set_random_seed(3)
    original = BertBackbone.from_preset("bert_tiny")
    prefix = save_bert_checkpoint(original, str(tmp_path / "ckpt" / "bert_model.ckpt"))
    output = str(tmp_path / "f.jsonl")
    assert main(["extract-features", "--preset", "bert_tiny", "--init-checkpoint", prefix, "--vocab", vocab,
                 "--input", source, "--layers", "-1", "--max-seq-length", str(T), "--output", output]) == 0
    first = json.loads(open(output, encoding="utf-8").readline())
    tokens, layers, _ = _direct(original, WordPieceTokenizer(vocab), LINES[0])
    assert [f["token"] for f in first["features"]] == tokens
    got = np.asarray([f["layers"][0]["values"] for f in first["features"]])
    np.testing.assert_allclose(got, layers[-1], atol=2e-6)
    # A checkpoint of another architecture: a clear error, exit 2.
    assert main(["extract-features", "--preset", "bert_mini", "--init-checkpoint", prefix, "--vocab", vocab,
                 "--input", source, "--max-seq-length", str(T), "--output", output]) == 2
    assert "--init-checkpoint" in capsys.readouterr().err


def test_roberta_with_byte_level_bpe(tmp_path, capsys):
    """A RoBERTa backbone with its BPE directory: `<s> a </s></s> b </s>`
    packing, BPE token strings, vectors equal to the encoder's own."""
    from kerasbert.models import RobertaBackbone
    from kerasbert.text import make_packer
    from kerasbert.text.bpe_training import train_bpe
    from kerasbert.text.tokenizer_loading import load_tokenizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(LINES * 20) + "\n", encoding="utf-8")
    train_bpe([str(corpus)], 300, str(tmp_path / "bpe"))
    tokenizer = load_tokenizer(str(tmp_path / "bpe"))
    keras.utils.set_random_seed(3)
    backbone = RobertaBackbone(vocabulary_size=tokenizer.vocabulary_size, num_layers=2,
                               num_heads=2, hidden_dim=8, intermediate_dim=16,
                               max_sequence_length=32, dropout=0.0)
    backbone.save(str(tmp_path / "roberta.keras"))
    source = tmp_path / "input.txt"
    source.write_text("\n".join(LINES[:3]) + "\n", encoding="utf-8")
    output = str(tmp_path / "features.jsonl")
    argv = ["extract-features", "--backbone", str(tmp_path / "roberta.keras"),
            "--vocab", str(tmp_path / "bpe"), "--input", str(source), "--layers", "-1",
            "--max-seq-length", "24", "--output", output]
    assert main(argv) == 0, capsys.readouterr().err
    records = [json.loads(line) for line in open(output, encoding="utf-8")]
    pair = [f["token"] for f in records[1]["features"]]
    assert pair[0] == "<s>" and pair[-1] == "</s>" and "Ġthe" in pair
    assert pair.count("</s>") == 3  # a </s></s> b </s>
    assert [f["token"] for f in records[2]["features"]] == ["<s>", "</s>"]
    packer = make_packer(tokenizer, 24)
    for text, record in zip(LINES[:3], records):
        parsed = parse_line(text)
        a, b = parsed if isinstance(parsed, tuple) else (parsed, None)
        x = packer(tokenizer.tokenize_ids([a]), None if b is None else tokenizer.tokenize_ids([b]))
        n = int(x["input_mask"].numpy().sum())
        expected = backbone({k: v.numpy() for k, v in x.items()})["sequence_output"]
        got = np.asarray([f["layers"][0]["values"] for f in record["features"]])
        np.testing.assert_allclose(got, keras.ops.convert_to_numpy(expected)[0, :n], atol=2e-6)
