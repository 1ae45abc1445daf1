"""Fill-mask's input ids (`encode_with_masks`) equal the `tokenizers`
library's for the same text, masks anywhere (at the start, after a space,
after punctuation, two of them, runs of spaces): each mask is cut out with
the whitespace its file's lstrip / rstrip flags take, for ModernBERT's
[MASK] and RoBERTa's <mask> (both lstrip in their tokenizer.json)."""

import json
import pathlib
import sys

import pytest

from kerasbert.loading.masked_lm import encode_with_masks
from kerasbert.text import load_tokenizer
from modernbert_folders import write_tokenizer

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "text"))
from test_source_tokenizer_parity import lines  # noqa: E402,F401
from test_source_tokenizer_parity import roberta_directory  # noqa: E402,F401

pytest.importorskip("tokenizers")

TEXTS = ["Paris is the {m} of France.", "{m} is the capital of France.",
         "Paris is the capital of France.{m}", "Paris,{m} and {m}.", "The  {m}  of France",
         "{m}", "café {m}{m} 한국어\t{m}\n", "e\u0301 {m} e\u0301"]


@pytest.fixture(scope="module")
def modernbert(tmp_path_factory, lines):
    root = tmp_path_factory.mktemp("modernbert_fill_mask")
    reference = write_tokenizer(root, lines[::7])
    (root / "config.json").write_text(json.dumps({"model_type": "modernbert"}))
    return root, reference


def test_modernbert_mask_ids_equal_tokenizers(modernbert, tmp_path, monkeypatch):
    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "cache"))
    root, reference = modernbert
    tokenizer = load_tokenizer(str(root))
    for text in (t.format(m="[MASK]") for t in TEXTS):
        assert encode_with_masks(tokenizer, text, 128) == reference.encode(text).ids, text


def test_roberta_mask_ids_equal_tokenizers(roberta_directory, tmp_path, monkeypatch):
    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "cache"))
    root, reference = roberta_directory
    for folder in (root / "model", root / "json_only"):  # vocab.json + merges.txt; tokenizer.json
        tokenizer = load_tokenizer(str(folder))
        for text in (t.format(m="<mask>") for t in TEXTS):
            expected = ([int(tokenizer.cls_id)] + reference.encode(text).ids
                        + [int(tokenizer.sep_id)])
            assert encode_with_masks(tokenizer, text, 128) == expected, (folder.name, text)
