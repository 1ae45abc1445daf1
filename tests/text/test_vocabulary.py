import argparse
import unicodedata

import pytest
from reliability.console import kerasbert
from reliability.console import ok

from kerasbert.errors import UsageError
from kerasbert.text import build_wordpiece_vocab
from kerasbert.text import load_vocab
from kerasbert.text import write_vocab
from kerasbert import commands

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TEXT = [
    "The movie was really good, I loved the acting and the music.",
    "Movies like this remind me why I love going to the cinema!",
    "이 영화 정말 재미있어요 배우들의 연기가 최고예요",
    "영화관에서 다시 보고 싶은 영화입니다",
    "我们今天去看电影，电影非常好看。",
    "日本語の映画も見ました。東京で撮影されました。",
    "Café crème, résumé, naïve façade — voilà!",
    "Emoji time 😀🎉 and more 🐼",
] * 5


@pytest.fixture
def corpus_file(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(TEXT) + "\n", encoding="utf-8")
    return path


def cjk_ideographs(text):
    return {c for c in text if "CJK UNIFIED IDEOGRAPH" in unicodedata.name(c, "")}


@pytest.mark.parametrize("lower_case", [True, False])
def test_build_specials_first_cjk_single_chars_size(corpus_file, lower_case):
    vocab = build_wordpiece_vocab([corpus_file], vocab_size=1000, lower_case=lower_case)
    assert vocab[:5] == SPECIALS
    assert len(vocab) <= 1000 and len(set(vocab)) == len(vocab)
    ideographs = cjk_ideographs("".join(TEXT))
    assert len(ideographs) >= 15
    assert ideographs <= set(vocab)
    # No multi-character token contains an ideograph (one token per ideograph).
    assert not [t for t in vocab if len(t.lstrip("#")) > 1 and cjk_ideographs(t)]
    # Accents are stripped only for the uncased vocabulary.
    assert ("é" in "".join(vocab)) is (not lower_case)


def test_vocab_size_respected_and_too_small(corpus_file):
    small = build_wordpiece_vocab([corpus_file], vocab_size=420)
    assert len(small) <= 420
    with pytest.raises(ValueError, match=r"vocab_size=50 is too small.*characters"):
        build_wordpiece_vocab([corpus_file], vocab_size=50)


def test_bad_inputs(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        build_wordpiece_vocab([tmp_path / "missing.txt"], 100)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n  \n")
    with pytest.raises(ValueError, match=r"empty.*empty.txt"):
        build_wordpiece_vocab([empty], 100)


def test_write_and_load_round_trip(tmp_path):
    path = tmp_path / "sub" / "vocab.txt"
    write_vocab(SPECIALS + ["a", "##b"], path)
    assert load_vocab(path) == SPECIALS + ["a", "##b"]
    assert [p.name for p in path.parent.iterdir()] == ["vocab.txt"]  # no temp left
    with pytest.raises(ValueError, match="multi-line"):
        write_vocab(["a", "b\nc"], tmp_path / "bad.txt")
    assert not (tmp_path / "bad.txt").exists()


def run_cli(argv):
    parser = argparse.ArgumentParser(prog="kerasbert")
    commands.register(parser.add_subparsers(dest="command"), "vocab")
    args = parser.parse_args(argv)
    args.func(args)


def test_cli(corpus_file, tmp_path):
    """`kerasbert vocab` as the installed console script; its refusals in
    this process (the verb's own parser)."""
    out = tmp_path / "vocab.txt"
    assert "wrote" in ok(kerasbert("vocab", "--input", corpus_file, "--vocab-size", "1000",
                                   "--output", "vocab.txt", "--no-lower-case", cwd=tmp_path))
    tokens = load_vocab(out)
    assert tokens[:5] == SPECIALS
    assert any("é" in t for t in tokens) and "The" in tokens  # cased
    with pytest.raises(UsageError, match="nope.txt"):
        run_cli(["vocab", "--input", str(tmp_path / "nope.txt"), "--vocab-size", "10",
                 "--output", str(out)])
    with pytest.raises(UsageError, match="too small"):
        run_cli(["vocab", "--input", str(corpus_file), "--vocab-size", "10",
                 "--output", str(tmp_path / "v2.txt")])
    assert not (tmp_path / "v2.txt").exists()


def test_cli_module_does_not_import_tensorflow():
    import subprocess
    import sys

    code = ("import sys, kerasbert.commands.vocab; "
            "sys.exit('tensorflow' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_progress_bar_over_input_bytes(corpus_file, capsys):
    from kerasbert.text import count_words

    counts = count_words([corpus_file], show_progress=True)
    assert counts["movie"] == 5
    err = capsys.readouterr().err
    assert "counting words" in err and "100%" in err


def test_rare_words_kept_when_room(tmp_path):
    # tensorflow-text's own search never goes under a count of 10; ours
    # goes down to 1 when the vocabulary has room.
    path = tmp_path / "tiny.txt"
    path.write_text("hello world\n中文 测试\n", encoding="utf-8")
    vocab = build_wordpiece_vocab([path], vocab_size=100)
    assert {"hello", "world", "中", "文", "测", "试"} <= set(vocab)
    assert len(vocab) <= 100


def test_characters_of_very_long_words_kept(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("short words here\n" + "abc" * 30 + "ж\n", encoding="utf-8")
    vocab = build_wordpiece_vocab([path], vocab_size=200)
    assert "ж" in vocab and "##ж" in vocab


def _zipf_word_counts(num_words=3000, seed=0):
    """Word counts shaped like real text: random words of 2-9 letters (a few
    with CJK ideographs), Zipf-distributed counts."""
    import collections
    import random

    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    counts = collections.Counter()
    for rank in range(1, num_words + 1):
        word = "".join(rng.choice(letters) for _ in range(rng.randint(2, 9)))
        if rank % 50 == 0:
            word = rng.choice("中文字日本語")
        counts[word] += max(1, int(200_000 / rank))
    return counts


@pytest.mark.parametrize("vocab_size", [900, 2000])
def test_size_lands_just_under_the_request(vocab_size):
    # The learner's size jumps between consecutive thresholds (e.g. 28,184
    # then too many for 30,522 on the bench corpus); the search cuts the
    # smallest too-big vocabulary down instead of settling far below.
    from kerasbert.text import learn_vocab

    counts = _zipf_word_counts()
    vocab = learn_vocab(counts, vocab_size)
    assert vocab_size * 0.99 <= len(vocab) <= vocab_size, len(vocab)
    assert vocab[:5] == SPECIALS and len(set(vocab)) == len(vocab)
    alphabet = {c for word in counts for c in word}
    assert alphabet <= set(vocab)
    assert {"##" + c for c in alphabet} <= set(vocab)
    # The most frequent words survive any cut.
    top = [w for w, _ in counts.most_common(20)]
    assert set(top) <= set(vocab)


def test_size_when_the_corpus_has_fewer_pieces():
    from kerasbert.text import learn_vocab

    # Every piece the corpus can give (2,915 tokens) is less than asked.
    vocab = learn_vocab(_zipf_word_counts(), 3500)
    assert 2800 < len(vocab) < 3500
