"""`load_tokenizer(DIR)` of a ModernBERT folder (its tokenizer.json alone,
written by the `tokenizers` library in the published structure) gives the
library's ids on the multilingual and adversarial samples with the
special-token switch on and off, and packs [CLS] a [SEP] (b [SEP]) with the
file's [PAD]."""

import json
import pathlib
import sys

import numpy as np
import pytest

# The project's tokenizer-parity samples live beside their tests.
sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "text"))
import adversarial_sample  # noqa: E402
import multilingual_sample  # noqa: E402
from test_source_tokenizer_parity import lines  # noqa: E402,F401
from test_source_tokenizer_parity import roberta_directory  # noqa: E402,F401
from kerasbert.text import load_tokenizer
from kerasbert.text.tokenizer_loading import make_packer
from modernbert_folders import write_tokenizer

pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    lines = multilingual_sample.multilingual_lines(min_lines=3000, faker_per_locale=40)
    path = tmp_path_factory.mktemp("modernbert_tokenizer")
    reference = write_tokenizer(path, lines[::5])
    (path / "config.json").write_text(json.dumps({"model_type": "modernbert"}))
    return path, reference, lines, adversarial_sample.adversarial_lines(lines=lines)


@pytest.mark.parametrize("on", [True, False], ids=["specials_on", "specials_off"])
def test_ids_equal_tokenizers(folder, on, tmp_path, monkeypatch):
    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "cache"))
    path, reference, lines, adversarial = folder
    ours = load_tokenizer(str(path), special_tokens_in_strings=on)
    assert type(ours).__name__ == "BertBytePairTokenizer"
    reference.encode_special_tokens = not on
    for name, texts in (("multilingual", lines[::4]), ("adversarial", adversarial)):
        got = ours.tokenize_ids(texts).to_list()
        expected = [e.ids for e in reference.encode_batch(texts, add_special_tokens=False)]
        equal = sum(a == b for a, b in zip(got, expected))
        print(f"specials {'on' if on else 'off'} {name}: {equal}/{len(texts)} lines equal")
        assert equal == len(texts), [t for t, a, b in zip(texts, got, expected) if a != b][:3]


def test_packs_cls_a_sep_b_sep_with_the_files_pad(folder):
    path, reference, _, _ = folder
    tokenizer = load_tokenizer(str(path))
    ids = {t: reference.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]", "[MASK]")}
    assert (tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id, tokenizer.mask_id) == tuple(
        ids.values())
    packer = make_packer(tokenizer, 24)
    first, second = "Hello world", "café 한국어"
    packed = packer(tokenizer.tokenize_ids([first]), tokenizer.tokenize_ids([second]))
    expected = reference.encode(first, second).ids
    row = np.asarray(packed["input_word_ids"])[0].tolist()
    assert row[:len(expected)] == expected
    assert row[len(expected):] == [ids["[PAD]"]] * (24 - len(expected))


def test_offsets_point_into_the_text_before_nfc(folder, tmp_path, monkeypatch):
    """Text NFC changes (decomposed accents, Hangul jamo, the whole
    multilingual sample in NFD): `tokenizers`' offsets into the ORIGINAL
    string, and so the same span texts (a composed "é" spans the "e" it
    came from); the leading space of " world" stays, as the file's
    TemplateProcessing leaves it."""
    import unicodedata

    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "cache"))
    path, reference, lines, _ = folder
    reference.encode_special_tokens = True  # our default: text is text
    texts = ["e\u0301x cafe\u0301 nai\u0308ve", "\u1100\u1161\u11a8 \u1112\u1161\u11ab hello  world",
             "\u0958x\uf900e\u0301\u0301", ""] + [unicodedata.normalize("NFD", t)
                                                 for t in lines[::10]]
    assert sum(unicodedata.normalize("NFC", t) != t for t in texts) > 100
    ours = load_tokenizer(str(path / "tokenizer.json"))
    ids, starts, ends = ours.tokenize_with_offsets(texts)
    expected = reference.encode_batch(texts, add_special_tokens=False)
    assert ids.to_list() == [e.ids for e in expected]
    got = [list(zip(s, e)) for s, e in zip(starts.to_list(), ends.to_list())]
    equal = sum(g == [tuple(o) for o in e.offsets] for g, e in zip(got, expected))
    print(f"offsets equal on {equal}/{len(texts)} lines")
    for text, spans, encoding in zip(texts, got, expected):
        assert [text[a:b] for a, b in spans] == [text[a:b] for a, b in encoding.offsets], text
    assert equal == len(texts)


#: Masks at the start, after one space, after runs of spaces and tabs, after
#: punctuation, two of them, after non-ASCII text (character offsets), and
#: after Unicode spaces (an ideographic space alone at the text's start).
MASK_TEXTS = ["{m} is the capital.", "Paris is the {m} of France.", "The  {m}  of France",
              "a \t \t{m}b", "Paris,{m} and ({m}).", "{m}{m}", "x {m} {m}", "café\u00a0 {m} 한국어",
              "e\u0301 \n{m}", "  {m}", "{m}", "\u3000{m}", "\u3000\u3000{m} x", "x\u3000{m}",
              "\u2003{m}.", "\u3000 {m}"]


def _mask_spans(ours, reference, mask):
    """(our ids, `tokenizers`' ids, our (start, end) pairs, theirs, the
    spans of the mask in "Paris is the {m} of France.") over MASK_TEXTS,
    special tokens parsed."""
    reference.encode_special_tokens = False
    texts = [t.format(m=mask) for t in MASK_TEXTS]
    ids, starts, ends = ours.tokenize_with_offsets(texts)
    expected = reference.encode_batch(texts, add_special_tokens=False)
    ours_offsets = [list(zip(s, e)) for s, e in zip(starts.to_list(), ends.to_list())]
    their_offsets = [[tuple(o) for o in encoding.offsets] for encoding in expected]
    mask_id = reference.token_to_id(mask)
    first = texts[1]
    span = [first[a:b] for i, (a, b) in zip(ids.to_list()[1], ours_offsets[1]) if i == mask_id]
    return ids.to_list(), [e.ids for e in expected], ours_offsets, their_offsets, span


def test_lstrip_mask_spans_take_the_whitespace_before_them(folder, tmp_path, monkeypatch):
    """An lstrip mask's span takes the whitespace before it, as
    TemplateProcessing leaves it."""
    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "cache"))
    path, reference, _, _ = folder
    ours = load_tokenizer(str(path), special_tokens_in_strings=True)
    ids, expected_ids, offsets, expected_offsets, span = _mask_spans(ours, reference, "[MASK]")
    assert ids == expected_ids
    assert offsets == expected_offsets
    assert span == [" [MASK]"]


def test_roberta_lstrip_mask_spans_take_the_whitespace_before_them(roberta_directory, tmp_path,
                                                                   monkeypatch):
    """A RoBERTa tokenizer.json's own post-processor (ByteLevel, trim_offsets
    false) decides the spans: <mask>'s takes the whitespace lstrip took."""
    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "cache"))
    root, reference = roberta_directory
    ours = load_tokenizer(str(root / "json_only"), special_tokens_in_strings=True)
    ids, expected_ids, offsets, expected_offsets, span = _mask_spans(ours, reference, "<mask>")
    assert ids == expected_ids
    assert offsets == expected_offsets
    assert span == [" <mask>"]
