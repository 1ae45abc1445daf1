"""The byte tokenizer (`--vocab bytes`): enwik8's ids (UTF-8 byte + 2, 0
padding, 1 the boundary), any script round-trips, character offsets, the
family facts, and a clear refusal of masked-LM data."""

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.errors import UsageError
from kerasbert.text import load_tokenizer
from kerasbert.text.families import BYTES
from kerasbert.text.tokenizer_paths import read_vocabulary
from kerasbert.text.tokenizer_paths import resolve_tokenizer_path
from kerasbert.text.tokenizer_loading import describe_tokenizer

TEXTS = ["Hello, world", "", "héllo 한국어 漢字 🙂", "tab\tand\nnewline"]


def test_ids_are_utf8_bytes_plus_two():
    tokenizer = load_tokenizer("bytes")
    assert (tokenizer.vocabulary_size, tokenizer.pad_id, tokenizer.cls_id,
            tokenizer.sep_id, tokenizer.mask_id) == (258, 0, 1, 1, None)
    ids = tokenizer.tokenize_ids(TEXTS)
    for text, row in zip(TEXTS, ids.to_list()):
        assert row == [b + 2 for b in text.encode("utf-8")]
    assert tokenizer.tokenize_ids("a").numpy().tolist() == [99]


def test_every_script_round_trips_and_specials_are_dropped():
    tokenizer = load_tokenizer("bytes")
    ids = tokenizer.tokenize_ids(TEXTS)
    assert [t.decode("utf-8") for t in tokenizer.detokenize(ids).numpy()] == TEXTS
    padded = tf.constant([[1, 106, 107, 1, 0, 0]])  # </s> h i </s> <pad> <pad>
    assert tokenizer.detokenize(padded).numpy().tolist() == [b"hi"]


def test_offsets_are_characters_of_the_text():
    tokenizer = load_tokenizer("bytes")
    text = "aé한"
    ids, starts, ends = tokenizer.tokenize_with_offsets([text])
    assert ids.to_list()[0] == [b + 2 for b in text.encode("utf-8")]
    # a: 1 byte, é: 2 bytes, 한: 3 bytes; each byte spans its character.
    assert starts.to_list()[0] == [0, 1, 1, 2, 2, 2]
    assert ends.to_list()[0] == [1, 2, 2, 3, 3, 3]


def test_family_facts():
    assert resolve_tokenizer_path("bytes") == (BYTES, ())
    kind, files, tokens = read_vocabulary("bytes")
    assert (kind, files, len(tokens), tokens[:3]) == (BYTES, (), 258, ["<pad>", "</s>", "<0x00>"])
    description = describe_tokenizer(load_tokenizer("bytes"))
    assert description == {"type": "bytes", "files": [], "lower_case": False,
                           "special_tokens_in_strings": False}
    specials = load_tokenizer("bytes").get_special_tokens_dict()
    assert "mask_id" not in specials and int(specials["vocab_size"]) == 258


def test_masked_data_with_bytes_is_refused(tmp_path):
    from kerasbert.data import create_pretraining_data

    corpus = tmp_path / "c.txt"
    corpus.write_text("One sentence.\nAnother one.\n\nA second document.\n")
    with pytest.raises(UsageError, match="--vocab bytes has no \\[MASK\\]"):
        create_pretraining_data([str(corpus)], "bytes", str(tmp_path / "out"),
                                objective="none", masking=True)
    assert not (tmp_path / "out").exists()
    np.testing.assert_array_equal(  # nothing else was touched
        sorted(p.name for p in tmp_path.iterdir()), ["c.txt"])
