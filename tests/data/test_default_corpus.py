"""The built-in corpus from the standard library's docstrings: format,
determinism, size, prose filtering, caching, no network."""

import os
import socket

import pytest

from kerasbert.data import default_corpus as dc


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "stdlib.txt"
    stats = dc.write_default_corpus(path)
    return path, stats


def _documents(text):
    assert text.endswith("\n\n") and "\n\n\n" not in text
    return [doc.split("\n") for doc in text[:-2].split("\n\n")]


def test_format(full):
    path, stats = full
    text = path.read_text(encoding="utf-8")
    docs = _documents(text)
    assert len(docs) == stats["documents"]
    assert sum(len(d) for d in docs) == stats["sentences"]
    assert os.path.getsize(path) == stats["bytes"]
    for doc in docs:
        assert len(doc) >= 2  # no empty (or one-line) documents
        for line in doc:
            assert line and line == line.strip() and "\t" not in line
            assert not line.startswith((">>>", "...")), line
    # Both sources are in: module docstrings and the pydoc topics.
    assert "The unary \"-\" (minus) operator yields the negation" in text
    assert "Return" in text and "\"while\" statement" in text


def test_size(full):
    """The standard library gives about 1.3 MB of prose (Python 3.11.7:
    475 documents, 17.1k sentences, 1,371,246 bytes, ~21k distinct words;
    an 8000-token WordPiece vocabulary builds from it in ~25 s)."""
    _, stats = full
    assert 0.5 * dc.MB < stats["bytes"] < 20 * dc.MB, stats
    assert stats["documents"] > 200 and stats["sentences"] > 5000, stats


def test_deterministic_and_max_mb(full, tmp_path):
    path, _ = full
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    stats_a = dc.write_default_corpus(a, max_mb=0.1)
    stats_b = dc.write_default_corpus(b, max_mb=0.1)
    assert a.read_bytes() == b.read_bytes() and stats_a == stats_b
    # Stops after the document that reaches the limit: a prefix of the whole.
    assert 0.1 * dc.MB <= stats_a["bytes"] < 0.2 * dc.MB
    assert path.read_bytes().startswith(a.read_bytes())
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]  # no temp files


def test_prose_filter():
    source = '''
def f():
    """Return the frobnicated value of the input.

    It works on every platform. The result is cached!

    >>> f()
    42

    Example::

        x = f()
        y = g(x)

    Args:
        value: the value to frobnicate, which must be
            a positive integer.

    {x: [1, 2], y: (3, 4)} -> {z: 5}
    """
'''
    assert dc.docstring_sentences(source) == [
        "Return the frobnicated value of the input.",
        "It works on every platform.",
        "The result is cached!",
    ]
    assert dc.docstring_sentences("def broken(:\n") == []
    assert dc.prose_paragraphs("1. The first step is taken\n   on every call.") == [
        "The first step is taken on every call."]


def test_stdlib_files_skip_tests_and_guis():
    files = list(dc.stdlib_files())
    assert files == list(dc.stdlib_files())  # same order every time
    parts = {part for f in files for part in f.split(os.sep)}
    assert not parts & {"test", "idlelib", "tkinter", "lib2to3", "ensurepip",
                        "site-packages"}
    assert any(f.endswith(os.sep + "argparse.py") for f in files)


def test_default_corpus_path_writes_once(tmp_path, monkeypatch):
    calls = []
    real = dc.write_default_corpus

    def small(path, max_mb=None):
        calls.append(path)
        return real(path, max_mb=0.02)

    monkeypatch.setattr(dc, "write_default_corpus", small)
    first = dc.default_corpus_path(str(tmp_path))
    assert dc.default_corpus_path(str(tmp_path)) == first and len(calls) == 1
    assert os.path.dirname(first) == str(tmp_path) and os.path.getsize(first) > 0
    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "env"))
    assert dc.default_corpus_path().startswith(str(tmp_path / "env"))


def test_no_network(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the default corpus must not use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    assert dc.write_default_corpus(tmp_path / "c.txt", max_mb=0.02)["documents"] > 0
