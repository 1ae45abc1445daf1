"""`exact_unigram`: our Unigram lattice (kerasbert/text/unigram_lattice.py)
and `tokenizers`' Precompiled normalizer (precompiled_charsmap.py) give the
libraries' ids, on tiny models this test writes with chosen scores.

The texts are random strings over a few digits and letters whose pieces
tie in exact arithmetic ("1" + "11" and "11" + "1" score the same), so
the libraries' rounding decides: sentencepiece adds path scores in
float32, `tokenizers` in float64 (from its tokenizer.json's float64
scores). Also: runs of unknown characters (one <unk>, or their bytes with
byte fallback), sentencepiece's user-defined pieces, `tokenizers`'
pre-tokenizers (Metaspace with and without word splitting, WhitespaceSplit
first), and its per-grapheme normalizer on the cases where it differs from
SentencePiece's longest match. Every text equal, in Python and in a
SavedModel.
"""

import json
import random

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf
from sentencepiece import sentencepiece_model_pb2 as model_pb2

from kerasbert.text import load_tokenizer
from kerasbert.text.sentencepiece_tokenizer import SentencePieceTokenizer

tokenizers = pytest.importorskip("tokenizers")

SPECIALS = ["<pad>", "[CLS]", "[SEP]", "[MASK]"]
PIECES = ["\u2581", "1", "11", "111", "5", "55", "15", "51", "\u25811", "\u25815", "\u258111",
          "a", "ab", "b", "ba", "\u2581a", "\u2581ab", "\u00e9", "a\u00e9", "1a", "5b"]
# "x", "ü", "中" and "😀" have no piece: unknown (or bytes).
ALPHABET = ["1"] * 6 + ["5"] * 3 + ["a", "b", "\u00e9", "x", "\u00fc", "\u4e2d", "\U0001F600",
                                    " ", " ", "  "]
EDGES = ["", " ", "x", "xx \u00fcx", "111", " 111 ", "1111111", "a\u00e9\u00e9x", "[MASK]"]


def _texts(seed, count=1500):
    rng = random.Random(seed)
    return EDGES + ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 30)))
                    for _ in range(count)]


def _scores(seed, float64):
    rng = random.Random(seed)
    scores = [-rng.uniform(1.0, 9.0) for _ in PIECES]
    return scores if float64 else [float(np.float32(s)) for s in scores]


def _sentencepiece_model(path, seed, byte_fallback, user_defined=()):
    """A Unigram .model of `PIECES` (float32 scores), ALBERT's special
    pieces as control pieces, `user_defined` pieces, and with
    `byte_fallback` the 256 byte pieces."""
    types = model_pb2.ModelProto.SentencePiece
    proto = model_pb2.ModelProto()
    proto.pieces.add(piece="<unk>", score=0.0, type=types.UNKNOWN)
    for piece in SPECIALS:
        proto.pieces.add(piece=piece, score=0.0, type=types.CONTROL)
    for piece, score in zip(PIECES, _scores(seed, False)):
        proto.pieces.add(piece=piece, score=score)
    for piece in user_defined:
        proto.pieces.add(piece=piece, score=0.0, type=types.USER_DEFINED)
    if byte_fallback:
        for byte in range(256):
            proto.pieces.add(piece=f"<0x{byte:02X}>", score=0.0, type=types.BYTE)
    trainer = proto.trainer_spec
    trainer.model_type = model_pb2.TrainerSpec.UNIGRAM
    trainer.vocab_size = len(proto.pieces)
    trainer.byte_fallback = byte_fallback
    trainer.unk_id, trainer.bos_id, trainer.eos_id, trainer.pad_id = 0, -1, -1, -1
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.add_dummy_prefix = True
    proto.normalizer_spec.remove_extra_whitespaces = True
    proto.normalizer_spec.escape_whitespaces = True
    path.write_bytes(proto.SerializeToString())
    return str(path)


@pytest.mark.parametrize("byte_fallback", [False, True], ids=["unk", "byte_fallback"])
def test_sentencepiece_ties_on_every_text(tmp_path, byte_fallback):
    """The sentencepiece library's ids on every text (float32 path scores,
    earliest start on ties, user-defined pieces scored bytes x the highest
    score - 0.1, unknown runs one <unk> or their bytes); the op (double
    candidates) breaks some of the ties the other way."""
    model = _sentencepiece_model(tmp_path / "tiny.model", 0, byte_fallback,
                                 user_defined=["b5", "\u00e9\u00e9"])
    library = spm.SentencePieceProcessor(model_file=model)
    texts = _texts(1)
    expected = [library.encode(t) for t in texts]
    exact = SentencePieceTokenizer(model, lower_case=False, exact_unigram=True)
    assert exact.tokenize_ids(texts).to_list() == expected
    ids, starts, ends = exact.tokenize_with_offsets(texts)
    assert ids.to_list() == expected
    assert all(0 <= a <= b <= len(t) for t, s, e in zip(texts, starts.to_list(), ends.to_list())
               for a, b in zip(s, e))
    op = SentencePieceTokenizer(model, lower_case=False).tokenize_ids(texts).to_list()
    assert 0 < sum(a != b for a, b in zip(op, expected)) < len(texts) // 10
    # In a tf.data map, in batches.
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(32).map(exact.tokenize_ids)
    assert [row for batch in dataset for row in batch.to_list()] == expected


def _tokenizers_directory(root, seed, pre_tokenizer, byte_fallback):
    """A directory with a Unigram tokenizer.json of `PIECES` with float64
    scores (no float32 among them), written by `tokenizers` itself.
    Returns (directory, the `tokenizers` reference)."""
    from tokenizers import AddedToken
    from tokenizers import Regex
    from tokenizers import Tokenizer
    from tokenizers import normalizers
    from tokenizers import pre_tokenizers

    vocab = [("<unk>", 0.0)] + [(p, 0.0) for p in SPECIALS]
    vocab += list(zip(PIECES, _scores(seed, True)))
    if byte_fallback:
        vocab += [(f"<0x{b:02X}>", -10.0) for b in range(256)]
    reference = Tokenizer(tokenizers.models.Unigram(vocab, unk_id=0, byte_fallback=byte_fallback))
    reference.normalizer = normalizers.Sequence([normalizers.Replace(Regex(" {2,}"), " ")])
    metaspace = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always",
                                         split=pre_tokenizer != "metaspace_unsplit")
    reference.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                        metaspace])
                               if pre_tokenizer == "whitespace_split" else metaspace)
    reference.add_special_tokens(["<unk>"] + SPECIALS[:-1] + [AddedToken("[MASK]", lstrip=True)])
    root.mkdir()
    reference.save(str(root / "tokenizer.json"))
    (root / "config.json").write_text(json.dumps({"model_type": "albert"}))
    return root, reference


@pytest.mark.parametrize("pre_tokenizer, byte_fallback", [
    ("metaspace", False), ("metaspace", True), ("metaspace_unsplit", False),
    ("whitespace_split", False)])
def test_tokenizers_float64_on_every_text(tmp_path, monkeypatch, pre_tokenizer, byte_fallback):
    """A tokenizer.json whose scores are no float32: `tokenizers`' ids on
    every text (float64 path scores from the file's own scores, a new
    lattice per Metaspace word or for the whole text, fused unknown runs
    or their bytes), in Python and in a SavedModel."""
    from kerasbert.text import hf_tokenizer_files

    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "cache"))
    directory, reference = _tokenizers_directory(tmp_path / "model", 2, pre_tokenizer,
                                                 byte_fallback)
    texts = _texts(3)
    expected = [e.ids for e in reference.encode_batch(texts, add_special_tokens=False)]
    ours = load_tokenizer(str(directory), special_tokens_in_strings=True, exact_unigram=True)
    assert ours.tokenize_ids(texts).to_list() == expected
    assert ours.tokenize_with_offsets(texts)[0].to_list() == expected
    model = open(ours.model_file, "rb").read()
    assert len(hf_tokenizer_files.float64_scores(model)) == len(ours.vocabulary)
    if pre_tokenizer == "metaspace" and not byte_fallback:
        # The same model with its scores rounded to float32 (the field
        # dropped) breaks some ties otherwise: the float64 scores count.
        proto = model_pb2.ModelProto()
        proto.ParseFromString(model)
        proto.DiscardUnknownFields()
        (tmp_path / "rounded.model").write_bytes(proto.SerializeToString())
        rounded = SentencePieceTokenizer(tmp_path / "rounded.model", lower_case=False,
                                         tokenizers_unigram=True, exact_unigram=True,
                                         special_tokens_in_strings=True,
                                         added_tokens=ours.added_tokens)
        assert rounded.tokenize_ids(texts).to_list() != expected
    if pre_tokenizer == "metaspace" and not byte_fallback:
        _check_saved_model(ours, texts, tmp_path / "saved")


def _check_saved_model(tokenizer, texts, path):
    module = tf.Module()
    module.tokenizer = tokenizer
    module.tokenize = tf.function(tokenizer.tokenize_ids,
                                  input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(path))
    loaded = tf.saved_model.load(str(path))
    assert loaded.tokenize(tf.constant(texts)).to_list() == tokenizer.tokenize_ids(texts).to_list()


# --- tokenizers' Precompiled normalizer, per grapheme ---------------------------

GRAPHEMES = [
    "A\u0302\u0300",  # 5 bytes: the shortest key ("Â") for the whole grapheme
    "\u0399\u0308\u0301",  # Greek "Ϊ́", 6 bytes: character by character
    "\u1100\u1161\u11a8",  # conjoining jamo: stay jamo
    "\ufb01\u0301",  # "ﬁ" + acute: "fi", the accent dropped
    "a\u0301\u0302 e\u0301",
    "\r\n", "x\r\ny",
    "\u2122\u0301",  # "™" + acute: "TM"
    "\U0001F468\u200d\u2122\u0301",  # an emoji ZWJ sequence: character by character
    "\U0001F1F0\u2122\u0301", "\U0001F1F0\U0001F1F7\u2122\u0301",  # regional indicators
    "\u0915\u094d\u0958\u0301", "\u0915\u0958\u0301",  # an Indic conjunct / not
    "a\u0600\u2122\u0301", "\u0600a",  # a prepended mark
    "\uff76\uff9e", "\u3131\u314f", "\uac00\u0301", "\u1100\u1161\u0301",
    "\x07a\u0301", "\u0301\u0302", "a\x00\u0301", "",
]


def test_precompiled_graphemes(tmp_path):
    """The normalization `tokenizers` makes of an nmt_nfkc charsmap, where
    it differs from SentencePiece's longest match, and the bytes each
    normalized character comes from."""
    from tokenizers import normalizers

    from kerasbert.text.precompiled_charsmap import PrecompiledNormalizer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(["abc de fgh ijk lmn"] * 50), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(tmp_path / "m"),
                                   vocab_size=18, model_type="unigram", hard_vocab_limit=False,
                                   normalization_rule_name="nmt_nfkc", minloglevel=2)
    proto = model_pb2.ModelProto()
    proto.ParseFromString((tmp_path / "m.model").read_bytes())
    charsmap = proto.normalizer_spec.precompiled_charsmap
    reference = normalizers.Precompiled(charsmap)
    chars, splits, starts, ends = PrecompiledNormalizer(charsmap).normalize(tf.constant(GRAPHEMES))
    rows = tf.RaggedTensor.from_row_splits(chars, splits).to_list()
    assert [b"".join(row).decode() for row in rows] == [reference.normalize_str(t)
                                                         for t in GRAPHEMES]
    # "ﬁ" + acute (bytes 0-5) gives "f" and "i", both from the whole grapheme.
    at = int(splits[3])
    assert starts[at:at + 2].numpy().tolist() == [0, 0]
    assert ends[at:at + 2].numpy().tolist() == [5, 5]
