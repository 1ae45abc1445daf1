"""`--vocab path/to/tokenizer.json`: a bare tokenizer.json (the file, not
its folder) loads the tokenizer its model folder loads, for every family a
tokenizer.json holds (WordPiece, byte-level BPE, Unigram, GPT-1's BPE,
ModernBERT's): the same class, settings and ids; and a folder whose only
tokenizer file it is needs no config.json."""

import json
import pathlib
import sys

import pytest

from kerasbert.errors import UsageError
from kerasbert.text import load_tokenizer
from kerasbert.text.tokenizer_paths import read_vocabulary
from kerasbert.text.tokenizer_paths import resolve_tokenizer_path
from kerasbert.text.tokenizer_loading import ids_settings

# Fixtures of the parity suites: folders written by `tokenizers` itself.
from test_gpt1_tokenizer import gpt1_dir  # noqa: F401
from test_source_tokenizer_parity import _wordpiece_directory
from test_source_tokenizer_parity import adversarial  # noqa: F401
from test_source_tokenizer_parity import albert_directory  # noqa: F401
from test_source_tokenizer_parity import lines  # noqa: F401
from test_source_tokenizer_parity import roberta_directory  # noqa: F401

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "models" / "modernbert"))
from modernbert_folders import write_tokenizer  # noqa: E402

pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def folders(tmp_path_factory, lines, roberta_directory, albert_directory, gpt1_dir):
    """{family: a model folder whose only tokenizer file is a tokenizer.json}."""
    root = tmp_path_factory.mktemp("bare")
    wordpiece, _ = _wordpiece_directory(root / "bert", lines, True, "tokenizer.json")
    gpt1 = root / "gpt1"
    gpt1.mkdir()
    for name in ("tokenizer.json", "config.json"):
        (gpt1 / name).write_bytes((gpt1_dir / name).read_bytes())
    modernbert = root / "modernbert"
    write_tokenizer(modernbert, lines[::7])
    (modernbert / "config.json").write_text(json.dumps({"model_type": "modernbert"}))
    return {"wordpiece": wordpiece, "bpe": roberta_directory[0] / "json_only",
            "sentencepiece": albert_directory[0] / "json_only", "gpt1_bpe": gpt1,
            "bert_bpe": modernbert}


@pytest.mark.parametrize("family", ["wordpiece", "bpe", "sentencepiece", "gpt1_bpe", "bert_bpe"])
def test_a_bare_tokenizer_json_is_its_folders_tokenizer(folders, family, lines, adversarial,
                                                       tmp_path, monkeypatch):
    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "cache"))
    folder = folders[family]
    texts = lines[::30] + adversarial[::10]
    for on in (False, True):
        from_folder = load_tokenizer(str(folder), special_tokens_in_strings=on)
        bare = load_tokenizer(str(folder / "tokenizer.json"), special_tokens_in_strings=on)
        assert type(bare) is type(from_folder)
        assert ids_settings(bare) == ids_settings(from_folder)
        assert ids_settings(bare)["type"] == family
        assert bare.tokenize_ids(texts).to_list() == from_folder.tokenize_ids(texts).to_list()
    kind, _, tokens = read_vocabulary(str(folder / "tokenizer.json"))
    assert (kind, len(tokens)) == (family, bare.vocabulary_size)
    assert tokens[int(bare.cls_id)] == bare.id_to_token(int(bare.cls_id))


def test_a_folder_with_only_a_tokenizer_json_needs_no_config(folders, tmp_path, monkeypatch):
    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "cache"))
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "tokenizer.json").write_bytes((folders["bert_bpe"] / "tokenizer.json").read_bytes())
    assert resolve_tokenizer_path(str(alone))[0] == "bert_bpe"
    text = ["Paris is the capital of France. café"]
    assert (load_tokenizer(str(alone)).tokenize_ids(text).to_list()
            == load_tokenizer(str(folders["bert_bpe"])).tokenize_ids(text).to_list())


def test_a_missing_or_foreign_tokenizer_json_is_one_line(tmp_path):
    with pytest.raises(UsageError, match=r"^Tokenizer file not found: .*nope/tokenizer.json$"):
        resolve_tokenizer_path(str(tmp_path / "nope" / "tokenizer.json"))
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"type": "WordLevel"}}))
    with pytest.raises(UsageError, match="a WordLevel model, which kerasbert does not read"):
        load_tokenizer(str(tmp_path / "tokenizer.json"))
