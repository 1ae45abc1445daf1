"""The special-token switch and the settings a source states, unit by unit:
what `tokenizers` does with "[cls]", "x[SEP]y", "[MASK]." and RoBERTa's
lstrip <mask> (the parity tests check whole samples), the added-token flags,
the longest word, and that a run directory keeps every setting."""

import json

import pytest
import tensorflow as tf

from kerasbert.errors import UsageError
from kerasbert.text import AddedToken
from kerasbert.text import ByteTokenizer
from kerasbert.text import WordPieceTokenizer
from kerasbert.text import describe_tokenizer
from kerasbert.text import load_saved_tokenizer
from kerasbert.text import load_tokenizer
from kerasbert.text import save_tokenizer_files
from kerasbert.text.hf_tokenizer_files import added_tokens
from kerasbert.text.hf_tokenizer_files import max_chars_per_word

tokenizers = pytest.importorskip("tokenizers")

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "x", "y", "[", "]", "cl", "##s", "mask",
         "sep", ".", "(", ")", "hello", "##x", "é", "##é", "<w>", "hey"]


@pytest.fixture()
def vocab(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    return path


def _tokens(tokenizer, text):
    return [tokenizer.id_to_token(int(i)) for i in tokenizer.tokenize_ids(text).numpy()]


def test_the_switch_on_and_off(vocab):
    on = WordPieceTokenizer(vocab, special_tokens_in_strings=True)
    off = WordPieceTokenizer(vocab)
    assert off.special_tokens_in_strings is False  # the default: text is text
    hf = tokenizers.BertWordPieceTokenizer(str(vocab), lowercase=True)
    for text in ["[CLS] x", "[cls] x", "x[SEP]y", "([MASK]).", "[MASK][MASK]", " [SEP] ",
                 "[Mask]", "hello [UNK] [PAD]"]:
        assert _tokens(on, text) == hf.encode(text, add_special_tokens=False).tokens, text
    assert _tokens(on, "x[SEP]y") == ["x", "[SEP]", "y"]
    assert _tokens(on, "[cls]") == ["[", "cl", "##s", "]"]  # case-sensitive, raw text
    assert _tokens(off, "x[SEP]y") == ["x", "[", "sep", "]", "y"]
    ids, starts, ends = on.tokenize_with_offsets("é([MASK]).")
    assert list(zip(starts.numpy(), ends.numpy()))[2] == (2, 8)  # the token's characters
    # A special token is a word of its own (whole-word masking, `tokenize`).
    assert on.tokenize("hello[SEP]x").to_list() == [[16], [3], [5]]


def test_lstrip_rstrip_and_single_word_flags(vocab):
    flags = [AddedToken("[MASK]", lstrip=True), AddedToken("[SEP]", rstrip=True),
             AddedToken("<w>", single_word=True)]
    ours = WordPieceTokenizer(vocab, special_tokens_in_strings=True, added_tokens=flags)
    reference = tokenizers.BertWordPieceTokenizer(str(vocab), lowercase=True)
    reference.add_special_tokens([tokenizers.AddedToken("[MASK]", lstrip=True),
                                  tokenizers.AddedToken("[SEP]", rstrip=True),
                                  tokenizers.AddedToken("<w>", single_word=True)])
    for text in ["x \u00a0[MASK] y", "x [SEP]\t y", "x <w> y", "x<w>y", "(<w>)", "é<w>"]:
        got = ours.tokenize_ids(text).numpy().tolist()
        assert got == reference.encode(text, add_special_tokens=False).ids, text
    ids, starts, ends = ours.tokenize_with_offsets("x  [MASK]")
    # The span takes the whitespace lstrip took, as `tokenizers` gives it.
    assert (starts.numpy()[-1], ends.numpy()[-1]) == (1, 9)
    assert reference.encode("x  [MASK]", add_special_tokens=False).offsets[-1] == (1, 9)


def test_non_special_added_tokens_are_matched_in_both_settings(vocab):
    hey = [AddedToken("hey", special=False, normalized=True)]
    for on in (True, False):
        ours = WordPieceTokenizer(vocab, special_tokens_in_strings=on, added_tokens=hey)
        # normalized: matched in the lower-cased text, as `tokenizers` does.
        assert _tokens(ours, "xHEYy") == ["x", "hey", "y"]


def test_words_longer_than_the_limit_are_one_unk(vocab):
    ours = WordPieceTokenizer(vocab, max_chars_per_word=4)
    assert _tokens(ours, "xxxx xxxxx") == ["x", "##x", "##x", "##x", "[UNK]"]
    # Characters, not bytes: "éééé" is 8 bytes (cased: accents kept).
    cased = WordPieceTokenizer(vocab, lower_case=False, max_chars_per_word=4)
    assert _tokens(cased, "éééé") == ["é", "##é", "##é", "##é"]
    assert _tokens(cased, "ééééé") == ["[UNK]"]
    ids, starts, ends = ours.tokenize_with_offsets("hey xxxxx")
    assert (starts.numpy().tolist(), ends.numpy().tolist()) == ([0, 4], [3, 9])
    with pytest.raises(ValueError, match="max_chars_per_word must be a positive integer"):
        WordPieceTokenizer(vocab, max_chars_per_word=0)


def test_bad_added_tokens_and_the_byte_vocabulary_are_refused(vocab):
    with pytest.raises(ValueError, match="'<zzz>' are not in the vocabulary"):
        WordPieceTokenizer(vocab, added_tokens=["<zzz>"])
    with pytest.raises(ValueError, match="lstrip='yes'; expected true or false"):
        WordPieceTokenizer(vocab, added_tokens=[{"content": "[SEP]", "lstrip": "yes"}])
    with pytest.raises(ValueError, match="does not apply to the byte vocabulary"):
        ByteTokenizer(special_tokens_in_strings=True)
    with pytest.raises(UsageError, match="does not apply to the byte vocabulary"):
        load_tokenizer("bytes", special_tokens_in_strings=True)


def test_what_hugging_face_files_state(tmp_path):
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"max_input_chars_per_word": 50, "added_tokens_decoder": {
        "1": {"content": "<mask>", "lstrip": True, "special": True},
        "0": {"content": "<s>", "special": True}}}))
    assert max_chars_per_word(None, str(config)) == 50
    assert max_chars_per_word(None, str(tmp_path / "missing.json")) == 100  # transformers'
    assert added_tokens(None, str(config)) == [AddedToken("<s>"), AddedToken("<mask>", lstrip=True)]
    config.write_text(json.dumps({"mask_token": {"content": "[MASK]", "lstrip": True},
                                  "sep_token": "[SEP]"}))
    assert added_tokens(None, str(config)) == [AddedToken("[SEP]"),
                                               AddedToken("[MASK]", lstrip=True)]
    config.write_text(json.dumps({"max_input_chars_per_word": "long"}))
    with pytest.raises(UsageError, match="max_input_chars_per_word must be a positive integer"):
        max_chars_per_word(None, str(config))


def test_a_google_bert_checkpoint_directory_allows_200_characters(tmp_path, vocab):
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "vocab.txt").write_bytes(vocab.read_bytes())
    (tmp_path / "bert" / "bert_config.json").write_text(json.dumps({"vocab_size": len(WORDS)}))
    for name in ("bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001"):
        (tmp_path / "bert" / name).write_bytes(b"")
    assert load_tokenizer(str(tmp_path / "bert")).max_chars_per_word == 200


def test_a_run_directory_keeps_every_setting(tmp_path, vocab):
    flags = [AddedToken("[MASK]", lstrip=True), AddedToken("[SEP]")]
    ours = WordPieceTokenizer(vocab, max_chars_per_word=7, special_tokens_in_strings=True,
                              added_tokens=flags)
    (tmp_path / "run").mkdir()
    description = save_tokenizer_files(ours, str(tmp_path / "run"))
    assert description == describe_tokenizer(ours)
    assert description["special_tokens_in_strings"] is True
    assert description["max_chars_per_word"] == 7
    assert description["added_tokens"] == [{"content": "[MASK]", "lstrip": True},
                                           {"content": "[SEP]"}]
    config = {"tokenizer": json.loads(json.dumps(description))}
    again = load_saved_tokenizer(str(tmp_path / "run"), config)
    assert again.added_tokens == tuple(flags) and again.max_chars_per_word == 7
    text = tf.constant(["hello  [MASK] xxxxxxxx [SEP]"])
    assert again.tokenize_ids(text).to_list() == ours.tokenize_ids(text).to_list()
    # An explicit setting overrides the saved one.
    assert not load_saved_tokenizer(str(tmp_path / "run"), config,
                                    special_tokens_in_strings=False).special_tokens_in_strings


def test_lower_case_is_character_by_character_and_nul_safe():
    from kerasbert.text.string_ops import lower_case

    got = lower_case(tf.constant(["A\x00B\x00C", "ΟΔΟΣ Σ", "\x00", ""])).numpy().tolist()
    # tf.strings.lower alone stops at the NUL and makes a final sigma "ς".
    assert got == ["a\x00b\x00c".encode(), "οδοσ σ".encode(), b"\x00", b""]
