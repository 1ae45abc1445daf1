"""SentencePiece (ALBERT): training with the `sentencepiece` package, the
in-graph tokenizer on tensorflow-text, and a SavedModel that loads with only
tensorflow + tensorflow_text."""

import os
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf

from kerasbert.text.sentencepiece_tokenizer import SentencePieceTokenizer
from kerasbert.text.sentencepiece_training import train_sentencepiece

from slow_marks import slow_covered_by

VOCAB_SIZE = 300
SAMPLES = [
    "Kato  RIMUN sel!",
    "Café naïve Zürich",
    "서울 영화가 재미있다",
    "中文字符 😀 [MASK] x",
    "",
    "  ΟΔΟΣ ﬁne\tTREVEN  ",
]


def _write_corpus(path, seed=0):
    """Pseudo-words from a few syllables (enough distinct pieces for a 300
    vocabulary) plus accented, Hangul, CJK and emoji words; one sentence per
    line, blank lines between documents."""
    rng = random.Random(seed)
    syllables = ["ka", "to", "ri", "mun", "sel", "par", "ven", "dor", "qui",
                 "lo", "zen", "bra", "fi", "ost", "el", "an", "Tre", "Gal"]
    extra = ["Café", "naïve", "서울", "한국어", "영화가", "재미있다", "中文",
             "字符", "😀", "Zürich"]

    def word():
        if rng.random() < 0.1:
            return rng.choice(extra)
        return "".join(rng.choice(syllables) for _ in range(rng.randint(1, 3)))

    with open(path, "w", encoding="utf-8") as f:
        for i in range(3000):
            f.write(" ".join(word() for _ in range(rng.randint(3, 12))) + "\n")
            if i % 50 == 49:
                f.write("\n")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spm")
    corpus = tmp / "corpus.txt"
    _write_corpus(corpus)
    model, vocab = train_sentencepiece([str(corpus)], VOCAB_SIZE, str(tmp / "albert"))
    return tmp, corpus, model, vocab


@pytest.fixture(scope="module")
def tokenizer(trained):
    return SentencePieceTokenizer(trained[2])


class TestTraining:
    def test_albert_layout(self, trained):
        _, _, model, vocab = trained
        sp = spm.SentencePieceProcessor(model_file=model)
        assert sp.get_piece_size() == VOCAB_SIZE
        assert [sp.id_to_piece(i) for i in range(5)] == [
            "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"
        ]
        assert sp.pad_id() == 0 and sp.unk_id() == 1
        assert sp.bos_id() == -1 and sp.eos_id() == -1
        assert all(sp.is_control(i) for i in (2, 3, 4))
        lines = open(vocab, encoding="utf-8").read().splitlines()
        assert len(lines) == VOCAB_SIZE
        assert [line.split("\t")[0] for line in lines] == [
            sp.id_to_piece(i) for i in range(VOCAB_SIZE)
        ]
        # Lower-cased corpus: no upper-case letter in any piece.
        assert not any(p != p.lower() for p in (sp.id_to_piece(i) for i in range(5, VOCAB_SIZE)))

    def test_deterministic(self, trained):
        tmp, corpus, model, vocab = trained
        again = train_sentencepiece([str(corpus)], VOCAB_SIZE, str(tmp / "again"))
        assert open(again[0], "rb").read() == open(model, "rb").read()
        assert open(again[1], "rb").read() == open(vocab, "rb").read()

    def test_errors_name_the_problem(self, trained, tmp_path):
        with pytest.raises(FileNotFoundError, match="missing.txt"):
            train_sentencepiece([str(tmp_path / "missing.txt")], 100, str(tmp_path / "m"))
        small = tmp_path / "small.txt"
        small.write_text("a b c\n", encoding="utf-8")
        with pytest.raises(ValueError, match="vocab_size=300"):
            train_sentencepiece([str(small)], 300, str(tmp_path / "m"))
        assert not (tmp_path / "m.model").exists()  # Nothing half-written.


def _saved_tokenizers(tokenizer, trained, export):
    """Saves a tf.Module with `tokenizer` and an exact_unigram tokenizer of
    the same .model (its lattice: tables and loops of core TensorFlow ops)
    to `export`. Returns (export, {output: NumPy array} of SAMPLES)."""
    module = tf.Module()
    module.tokenizer = tokenizer
    module.exact = exact = SentencePieceTokenizer(trained[2], exact_unigram=True)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def tokenize(texts):
        ids, starts, ends = tokenizer.tokenize_with_offsets(texts)
        exact_ids, exact_starts, _ = exact.tokenize_with_offsets(texts)
        return {"ids": ids.to_tensor(-1), "starts": starts.to_tensor(-1),
                "ends": ends.to_tensor(-1), "text": tokenizer.detokenize(ids),
                "exact_ids": exact_ids.to_tensor(-1),
                "exact_starts": exact_starts.to_tensor(-1)}

    module.tokenize = tokenize
    tf.saved_model.save(module, str(export))
    assert (export / "assets" / "albert.model").exists()
    return export, {k: v.numpy() for k, v in tokenize(tf.constant(SAMPLES)).items()}


class TestTokenizer:
    def test_ids_equal_sentencepiece(self, trained, tokenizer):
        sp = spm.SentencePieceProcessor(model_file=trained[2])
        ids = tokenizer.tokenize_ids(SAMPLES)
        assert ids.dtype == tf.int32
        assert ids.to_list() == [sp.encode(t.lower()) for t in SAMPLES]
        # A scalar gives a dense vector.
        assert tokenizer.tokenize_ids(SAMPLES[0]).numpy().tolist() == sp.encode(
            SAMPLES[0].lower()
        )

    def test_exact_unigram(self, trained, tokenizer, tmp_path):
        """exact_unigram: our own lattice gives the library's ids and the
        same words and offsets; the tokenizer's description keeps the
        switch, and a run's tokenizer comes back with it."""
        from kerasbert.text import describe_tokenizer
        from kerasbert.text import load_saved_tokenizer
        from kerasbert.text import save_tokenizer_files

        sp = spm.SentencePieceProcessor(model_file=trained[2])
        exact = SentencePieceTokenizer(trained[2], exact_unigram=True)
        assert exact.tokenize_ids(SAMPLES).to_list() == [sp.encode(t.lower()) for t in SAMPLES]
        assert exact.tokenize(SAMPLES).to_list() == tokenizer.tokenize(SAMPLES).to_list()
        for a, b in zip(exact.tokenize_with_offsets(SAMPLES),
                        tokenizer.tokenize_with_offsets(SAMPLES)):
            assert a.to_list() == b.to_list()
        assert describe_tokenizer(exact)["exact_unigram"] is True
        assert describe_tokenizer(tokenizer)["exact_unigram"] is False
        description = save_tokenizer_files(exact, str(tmp_path))
        again = load_saved_tokenizer(str(tmp_path), {"tokenizer": description})
        assert again.exact_unigram
        assert not load_saved_tokenizer(str(tmp_path), {"tokenizer": description},
                                        exact_unigram=False).exact_unigram

    def test_cased(self, trained):
        cased = SentencePieceTokenizer(trained[2], lower_case=False)
        sp = spm.SentencePieceProcessor(model_file=trained[2])
        assert cased.tokenize_ids(SAMPLES).to_list() == [sp.encode(t) for t in SAMPLES]

    def test_special_ids_and_vocabulary(self, tokenizer):
        assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id,
                tokenizer.sep_id, tokenizer.mask_id) == (0, 1, 2, 3, 4)
        assert tokenizer.vocabulary_size == VOCAB_SIZE == len(tokenizer.vocabulary)
        assert tokenizer.id_to_token(2) == "[CLS]"
        assert tokenizer.token_to_id("[MASK]") == 4
        assert tokenizer.token_to_id("no such piece") == tokenizer.unk_id
        pieces = tokenizer.vocabulary[5:9]
        ids = tokenizer.token_to_id(tf.constant(pieces)).numpy().tolist()
        assert ids == [5, 6, 7, 8]
        assert [t.decode() for t in tokenizer.id_to_token(ids).numpy()] == pieces
        special = {k: int(v) for k, v in tokenizer.get_special_tokens_dict().items()}
        assert special == {"padding_id": 0, "start_of_sequence_id": 2,
                           "end_of_segment_id": 3, "mask_id": 4, "vocab_size": 300}
        # Text cannot produce a control symbol.
        assert 4 not in tokenizer.tokenize_ids("[MASK]").numpy().tolist()

    def test_words(self, tokenizer):
        words = tokenizer.tokenize(SAMPLES)
        assert words.merge_dims(-2, -1).to_list() == tokenizer.tokenize_ids(SAMPLES).to_list()
        for row, text in zip(words.to_list(), SAMPLES):
            for i, word in enumerate(row):
                first = tokenizer.id_to_token(word[0])
                assert i == 0 or first.startswith("\u2581")
                assert not any(tokenizer.id_to_token(p).startswith("\u2581") for p in word[1:])
        # Whitespace-separated words of the corpus alphabet: one word each.
        assert words.row_lengths().numpy().tolist()[:3] == [3, 3, 3]
        assert words.row_lengths().numpy().tolist()[4] == 0  # empty text

    def test_offsets_point_into_original_text(self, tokenizer):
        ids, starts, ends = tokenizer.tokenize_with_offsets(SAMPLES)
        assert ids.to_list() == tokenizer.tokenize_ids(SAMPLES).to_list()
        for text, row, s, e in zip(SAMPLES, ids.to_list(), starts.to_list(), ends.to_list()):
            assert all(0 <= a <= b <= len(text) for a, b in zip(s, e))
            assert s == sorted(s)
            for piece_id, a, b in zip(row, s, e):
                piece = tokenizer.id_to_token(piece_id)
                if piece_id == tokenizer.unk_id:
                    continue
                # Original text, case and extra spaces included: it
                # normalises (NFKC, lower, spaces -> "▁") to the piece.
                span = text[a:b]
                assert piece.replace("\u2581", "") == "".join(span.lower().split()).replace(
                    "ﬁ", "fi"
                ), (piece, span)
        # Case survives in the spans: "Café" starts at 0 and keeps its "C".
        s, e = starts.to_list()[1], ends.to_list()[1]
        assert SAMPLES[1][s[0]:e[0]] == "Café"

    def test_detokenize(self, tokenizer):
        texts = ["kato rimun sel", "café zürich 서울"]
        ids = tokenizer.tokenize_ids(texts)
        expected = [t.encode() for t in texts]
        assert tokenizer.detokenize(ids).numpy().tolist() == expected
        assert tokenizer.detokenize(tokenizer.tokenize(texts)).numpy().tolist() == expected
        dense = ids.to_tensor(default_value=tokenizer.pad_id)
        assert tokenizer.detokenize(dense).numpy().tolist() == expected
        assert tokenizer.detokenize(ids[0]).numpy() == expected[0]

    def test_in_tf_data(self, tokenizer):
        ds = tf.data.Dataset.from_tensor_slices(SAMPLES).batch(3).map(tokenizer.tokenize_ids)
        got = [row for batch in ds for row in batch.to_list()]
        assert got == tokenizer.tokenize_ids(SAMPLES).to_list()

    def test_survives_kernel_cache_reset(self, trained):
        # tf.random.set_seed clears the eager kernel cache, which frees
        # tensorflow-text's kernel-private model resource; ours is shared.
        tokenizer = SentencePieceTokenizer(trained[2])
        before = tokenizer.tokenize_ids(SAMPLES).to_list()
        tf.random.set_seed(1)
        assert tokenizer.tokenize_ids(SAMPLES).to_list() == before

    def test_bad_model_files(self, tmp_path, trained):
        with pytest.raises(FileNotFoundError, match="nope.model"):
            SentencePieceTokenizer(tmp_path / "nope.model")
        bad = tmp_path / "bad.model"
        bad.write_bytes(b"not a model")
        with pytest.raises(ValueError, match="bad.model"):
            SentencePieceTokenizer(bad)

    def test_saved_model_in_process(self, tokenizer, trained, tmp_path):
        """The SavedModel of the fresh-process test below (the op's tokenizer
        and exact_unigram's lattice, ids, offsets, detokenized text), loaded
        back in this process with the source .model file moved away."""
        export, expected = _saved_tokenizers(tokenizer, trained, tmp_path / "export")
        moved = tmp_path / "moved.model"
        os.replace(trained[2], moved)
        try:
            got = tf.saved_model.load(str(export)).tokenize(tf.constant(SAMPLES))
            for key, value in expected.items():
                np.testing.assert_array_equal(got[key].numpy(), value)
        finally:
            os.replace(moved, trained[2])

    # 17 s: a second Python with only tensorflow and tensorflow_text loads it; the default
    # suite loads the same SavedModel in process and serves SentencePiece exports there.
    @slow_covered_by("tests/text/test_sentencepiece_tokenizer.py::TestTokenizer::test_saved_model_in_process",
                     "tests/serving/test_export_families.py::test_pair_export_in_process")
    def test_saved_model_in_fresh_process(self, tokenizer, trained, tmp_path):
        export, expected = _saved_tokenizers(tokenizer, trained, tmp_path / "export")
        expected["text"] = expected["text"].astype("S")  # No pickled objects.
        np.savez(tmp_path / "expected.npz", **expected)
        # The model proto lives in the graph: the source file is not needed.
        script = textwrap.dedent(
            f"""
            import sys, numpy as np, tensorflow as tf, tensorflow_text
            model = tf.saved_model.load({str(export)!r})
            got = model.tokenize(tf.constant({SAMPLES!r}))
            expected = np.load({str(tmp_path / "expected.npz")!r})
            for key in expected.files:
                np.testing.assert_array_equal(got[key].numpy(), expected[key])
            assert not [m for m in sys.modules if m.startswith(("kerasbert", "keras_hub", "sentencepiece"))]
            print("OK")
            """
        )
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        moved = tmp_path / "moved.model"
        os.replace(trained[2], moved)
        try:
            result = subprocess.run(
                [sys.executable, "-c", script], capture_output=True, text=True,
                env=env, timeout=300, cwd=str(tmp_path),  # a hang guard (normally ~10 s)
            )
        finally:
            os.replace(moved, trained[2])
        assert result.returncode == 0 and "OK" in result.stdout, result.stderr[-2000:]
