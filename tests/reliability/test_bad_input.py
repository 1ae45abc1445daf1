"""Impossible or undecodable input is refused up front (issue 18, items 3-4):
exit 2, one `error:` line naming the file / key and the value, and nothing
written (or, over earlier output, nothing lost). Most cases call
`kerasbert.cli.main` in-process; a few run the installed console script in a
fresh process (`console.kerasbert`), as a user does."""

import os

import pytest

from kerasbert.cli import main
from reliability.console import kerasbert
from reliability.console import one_line_error

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = "the a cat dog sat on mat good bad movie great is was . , ! ?".split()
LATIN1 = "Good movie.\nGreat one!\n".encode() + "Caf\u00e9 au lait.\n".encode("latin-1")
BAD_OFFSET = len(b"Good movie.\nGreat one!\nCaf")  # the 0xe9 of "Café" in Latin-1


def write_vocab(directory):
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    tokens = SPECIALS + letters + ["##" + c for c in letters] + WORDS
    path = os.path.join(directory, "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(dict.fromkeys(tokens)) + "\n")
    return path


def error_line(capsys, *fragments):
    """The one `error:` line of a failed in-process command; each fragment
    must appear in it."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    return lines[0]


def listing(folder):
    """{relative path: bytes} of every file under `folder` (hidden included)."""
    found = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, folder)] = f.read()
    return found


# --- create-pretraining-data / vocab: corpora without text ------------------


EMPTY_CORPORA = {"empty": b"", "blank_lines": b"\n\n  \n\t\n\r\n", "bom_only": b"\xef\xbb\xbf\n \n"}


def create_args(corpus, vocab, out, *extra):
    return ["create-pretraining-data", "--input", str(corpus), "--vocab", vocab,
            "--output-dir", str(out), "--dupe-factor", "1", "--no-progress", *extra]


@pytest.mark.parametrize("content", EMPTY_CORPORA.values(), ids=EMPTY_CORPORA.keys())
def test_create_pretraining_data_refuses_a_corpus_without_documents(tmp_path, capsys, content):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(content)
    out = tmp_path / "data"
    assert main(create_args(corpus, write_vocab(str(tmp_path)), out)) == 2
    error_line(capsys, "no documents in --input", "corpus.txt")
    assert not out.exists()


def test_documents_without_tokens_write_nothing_and_keep_earlier_data(tmp_path, capsys):
    """Documents whose sentences tokenize to nothing (control characters)
    give 0 instances: exit 2, and the data already in --output-dir stays."""
    vocab = write_vocab(str(tmp_path))
    good = tmp_path / "good.txt"
    good.write_text("the cat sat .\nthe dog is good .\n\nthe movie was great !\n", encoding="utf-8")
    out = tmp_path / "data"
    assert main(create_args(good, vocab, out)) == 0
    before = listing(out)
    assert "metadata.json" in before
    capsys.readouterr()
    control = tmp_path / "control.txt"
    control.write_text("\x07\x07\n\n\x01\x02\n", encoding="utf-8")
    assert main(create_args(control, vocab, out, "--overwrite")) == 2
    error_line(capsys, "no instances from the 2 document(s)", "control.txt")
    assert listing(out) == before  # no temporary left, nothing replaced
    fresh = tmp_path / "fresh"
    assert main(create_args(control, vocab, fresh)) == 2
    assert not fresh.exists()


@pytest.mark.parametrize("vocab_type", ["wordpiece", "bpe", "sentencepiece"])
@pytest.mark.parametrize("content", EMPTY_CORPORA.values(), ids=EMPTY_CORPORA.keys())
def test_vocab_refuses_a_corpus_without_text(tmp_path, capsys, vocab_type, content):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(content)
    out = tmp_path / "vocab_out"
    assert main(["vocab", "--type", vocab_type, "--input", str(corpus), "--vocab-size", "300",
                 "--output", str(out)]) == 2
    error_line(capsys, "no text in --input", "corpus.txt")
    assert os.listdir(tmp_path) == ["corpus.txt"]


# --- not UTF-8 ---------------------------------------------------------------


@pytest.mark.parametrize("vocab_type", ["wordpiece", "bpe", "sentencepiece"])
def test_vocab_refuses_a_non_utf8_corpus_naming_file_and_byte_offset(tmp_path, capsys,
                                                                      vocab_type):
    good = tmp_path / "good.txt"
    good.write_text("the cat sat on the mat .\n" * 20, encoding="utf-8")
    corpus = tmp_path / "latin1.txt"
    corpus.write_bytes(LATIN1)
    out = tmp_path / "vocab_out"
    assert main(["vocab", "--type", vocab_type, "--input", str(good), str(corpus),
                 "--vocab-size", "300", "--output", str(out)]) == 2
    error_line(capsys, f"{corpus}: not UTF-8 text", "byte 0xe9",
               f"byte offset {BAD_OFFSET} (line 3)")
    assert sorted(os.listdir(tmp_path)) == ["good.txt", "latin1.txt"]


def test_create_pretraining_data_refuses_a_binary_corpus_in_a_fresh_process(tmp_path):
    """A binary file (not UTF-8) given as the corpus, as a user runs it: the
    installed script exits 2 with the file and the first bad byte's offset,
    and writes nothing."""
    vocab = write_vocab(str(tmp_path))
    corpus = tmp_path / "corpus.bin"
    corpus.write_bytes(b"the cat sat .\n" * 3 + bytes(range(256)))
    work = tmp_path / "elsewhere"
    work.mkdir()
    result = kerasbert(*create_args(corpus, vocab, "data"), cwd=work)
    one_line_error(result, "kerasbert create-pretraining-data: error:", str(corpus),
                   "not UTF-8", f"byte offset {14 * 3 + 0x80}")
    assert os.listdir(work) == []
