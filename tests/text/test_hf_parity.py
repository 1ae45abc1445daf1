"""Token ids identical to HF `tokenizers`' BertWordPieceTokenizer.

Same vocabulary (built by our builder from the sample), same casing, on a
real multilingual sample of >10,000 lines (tests/text/multilingual_sample.py,
offline) and on the adversarial sample (tests/text/adversarial_sample.py:
words of 90-500 characters in every script, special-token strings, control
characters, empty lines). Every line is equal, with the special-token switch
in both settings: on, as `tokenizers` matches [CLS] [SEP] [PAD] [UNK] [MASK]
in text; off, as `tokenizers` with its own switch off (encode_special_tokens).
"""

import itertools

import pytest

from kerasbert.text import WordPieceTokenizer
from kerasbert.text import build_wordpiece_vocab
from kerasbert.text import write_vocab
import adversarial_sample
import multilingual_sample as corpus
from slow_marks import slow_covered_by

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    lines = corpus.multilingual_lines(min_lines=10_000)
    root = tmp_path_factory.mktemp("parity")
    # Vocabulary from every 4th line (a realistic share of unseen words and
    # [UNK]s in the other lines, and a 4x faster learner).
    path = root / "sample.txt"
    path.write_text("\n".join(lines[::4]) + "\n", encoding="utf-8")
    return lines, path, root


def test_ids_and_words_match_hf_tokenizers_with_a_smaller_vocabulary(sample, tmp_path):
    """The check below, uncased, with a vocabulary our builder learns from
    every 20th line (3000 pieces; the 8000 from every 4th line take ~10 s to
    learn): ids and word grouping equal HF's on every line of both samples,
    with the special-token switch on and off."""
    lines, _, _ = sample
    path = tmp_path / "sample.txt"
    path.write_text("\n".join(lines[::20]) + "\n", encoding="utf-8")
    vocab = build_wordpiece_vocab([path], vocab_size=3000, lower_case=True)
    write_vocab(vocab, tmp_path / "vocab.txt")
    hf = tokenizers.BertWordPieceTokenizer(str(tmp_path / "vocab.txt"), lowercase=True,
                                           strip_accents=True, clean_text=True,
                                           handle_chinese_chars=True)
    samples = {"multilingual": lines, "adversarial": adversarial_sample.adversarial_lines()}
    for on in (True, False):
        ours = WordPieceTokenizer(tmp_path / "vocab.txt", lower_case=True,
                                  special_tokens_in_strings=on)
        hf._tokenizer.encode_special_tokens = not on
        for name, texts in samples.items():
            encodings = hf.encode_batch(texts, add_special_tokens=False)
            words = ours.tokenize(texts)
            got = words.merge_dims(-2, -1).to_list()
            hf_sizes = [[len(list(g)) for _, g in itertools.groupby(e.word_ids)]
                        for e in encodings]
            differing = {line for line, a, b, c, d in zip(
                texts, got, encodings, words.row_lengths(axis=2).to_list(), hf_sizes)
                if list(a) != b.ids or list(c) != d}
            print(f"specials {'on' if on else 'off'} {name}: "
                  f"{len(texts) - len(differing)}/{len(texts)} lines equal")
            assert not differing, sorted(differing)[:10]
    flat = [i for row in ours.tokenize_ids(lines).to_list() for i in row]
    assert ours.unk_id in flat and sum(vocab[i].startswith("##") for i in flat) > 1000


# 17 s each: our builder's 8000-piece vocabulary from every 4th line (~10 s to learn), then
# every line; the default suite checks the same with a 3000-piece vocabulary, and the cased
# pipeline against tokenizers on both samples.
SLOW_VOCABULARY = slow_covered_by(
    "tests/text/test_hf_parity.py::test_ids_and_words_match_hf_tokenizers_with_a_smaller_vocabulary",
    "tests/text/test_source_tokenizer_parity.py::test_wordpiece_directories")


@pytest.mark.parametrize("lower_case", [
    pytest.param(True, marks=SLOW_VOCABULARY), pytest.param(False, marks=SLOW_VOCABULARY)],
    ids=["uncased", "cased"])
def test_ids_match_hf_tokenizers(sample, lower_case):
    lines, path, root = sample
    vocab = build_wordpiece_vocab([path], vocab_size=8000, lower_case=lower_case)
    assert len(vocab) <= 8000 and vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab_file = root / f"vocab_{lower_case}.txt"
    write_vocab(vocab, vocab_file)

    hf = tokenizers.BertWordPieceTokenizer(
        str(vocab_file), lowercase=lower_case, strip_accents=lower_case,
        clean_text=True, handle_chinese_chars=True,
    )
    samples = {"multilingual": lines, "adversarial": adversarial_sample.adversarial_lines()}
    for on in (True, False):
        ours = WordPieceTokenizer(vocab_file, lower_case=lower_case, special_tokens_in_strings=on)
        hf._tokenizer.encode_special_tokens = not on
        for name, sample in samples.items():
            encodings = hf.encode_batch(sample, add_special_tokens=False)
            got = ours.tokenize_ids(sample).to_list()
            # Word grouping (whole-word masking relies on it) matches HF's word ids.
            words = ours.tokenize(sample)
            assert words.merge_dims(-2, -1).to_list() == got
            got_sizes = words.row_lengths(axis=2).to_list()
            differing = {line for line, a, b in zip(sample, got, encodings) if list(a) != b.ids}
            hf_sizes = [[len(list(g)) for _, g in itertools.groupby(e.word_ids)]
                        for e in encodings]
            differing |= {line for line, a, b in zip(sample, got_sizes, hf_sizes) if list(a) != b}
            print(f"specials {'on' if on else 'off'} {name}: "
                  f"{len(sample) - len(differing)}/{len(sample)} lines equal")
            assert not differing, sorted(differing)[:10]

    assert len(lines) >= 10_000
    # The sample is not trivially all-[UNK] or all whole words.
    flat = [i for row in ours.tokenize_ids(lines).to_list() for i in row]
    assert ours.unk_id in flat
    assert sum(vocab[i].startswith("##") for i in flat) > 1000
