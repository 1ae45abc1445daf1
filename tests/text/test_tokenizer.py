import unicodedata

import pytest
import tensorflow as tf

from kerasbert.text import WordPieceTokenizer
from kerasbert.text import write_vocab

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = [
    "hello", "world", "!", ",", ".", "un", "##aff", "##able", "cafe", "café", "resume",
    "the", "movie", "is", "good", "정말", "좋", "##아요", "中", "国", "人", "日", "本",
    "😀", "🐼", "naive", "a", "##b", "##c", "Hello", "Café",
]
# Uncased BERT normalizes to NFD, which decomposes Hangul syllables into
# conjoining jamo: an uncased vocabulary holds Korean in that form.
NFD = lambda s: unicodedata.normalize("NFD", s)  # noqa: E731
WORDS += [NFD("정말"), NFD("좋"), "##" + NFD("아요")]


def write(tmp_path, tokens, name="vocab.txt"):
    path = tmp_path / name
    path.write_text("\n".join(tokens) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture
def vocab_file(tmp_path):
    return write(tmp_path, SPECIALS + WORDS)


def pieces(tokenizer, text):
    return [tokenizer.id_to_token(int(i)) for i in tokenizer.tokenize_ids(text).numpy()]


def test_original_google_layout_special_ids(tmp_path):
    # As the released 30522-token vocab: [PAD] 0, [unused0..98], [UNK] 100,
    # [CLS] 101, [SEP] 102, [MASK] 103, then the rest.
    tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(99)]
    tokens += ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
    tokenizer = WordPieceTokenizer(write(tmp_path, tokens))
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id) == (0, 100, 101)
    assert (tokenizer.sep_id, tokenizer.mask_id) == (102, 103)
    assert tokenizer.vocabulary_size == len(tokens)
    assert tokenizer.token_to_id("hello") == 104
    assert pieces(tokenizer, "Hello unknownword") == ["hello", "[UNK]"]
    assert int(tokenizer.tokenize_ids("zzz")[0]) == 100


def test_our_layout_special_ids(vocab_file):
    tokenizer = WordPieceTokenizer(vocab_file)
    ids = [tokenizer.pad_id, tokenizer.unk_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id]
    assert ids == [0, 1, 2, 3, 4]
    assert tokenizer.vocabulary[:5] == SPECIALS


def test_bad_vocab_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        WordPieceTokenizer(str(tmp_path / "nope.txt"))
    empty = write(tmp_path, [], "empty.txt")
    with pytest.raises(ValueError, match="empty"):
        WordPieceTokenizer(empty)
    dup = write(tmp_path, SPECIALS + ["a", "b", "a"], "dup.txt")
    with pytest.raises(ValueError, match=r"dup.txt.*duplicate.*'a' \(lines 6 and 8\)"):
        WordPieceTokenizer(dup)
    no_mask = write(tmp_path, ["[PAD]", "[UNK]", "[CLS]", "a"], "nomask.txt")
    with pytest.raises(ValueError, match=r"nomask.txt lacks .*\[SEP\], \[MASK\]"):
        WordPieceTokenizer(no_mask)


def test_word_boundaries_and_merge(vocab_file):
    tokenizer = WordPieceTokenizer(vocab_file)
    words = tokenizer.tokenize(["unaffable hello!", "", "abc"])
    assert words.shape.rank == 3
    as_tokens = [[[tokenizer.vocabulary[i] for i in w] for w in row] for row in words.to_list()]
    assert as_tokens == [[["un", "##aff", "##able"], ["hello"], ["!"]], [], [["a", "##b", "##c"]]]
    merged = tokenizer.tokenize_ids(["unaffable hello!", "", "abc"])
    assert words.merge_dims(-2, -1).to_list() == merged.to_list()
    assert merged.dtype == tf.int32
    # A scalar in, one example out.
    assert tokenizer.tokenize("abc hello").shape.rank == 2
    assert tokenizer.tokenize_ids("abc hello").shape.rank == 1


def test_normalization_like_bert(vocab_file):
    uncased = WordPieceTokenizer(vocab_file)
    # Accents stripped and lower-cased (BERT uncased).
    assert pieces(uncased, "Café RÉSUMÉ naïve") == ["cafe", "resume", "naive"]
    # Every CJK ideograph is its own word; Hangul is not split per syllable.
    assert pieces(uncased, "中国人日本") == ["中", "国", "人", "日", "本"]
    assert [len(w) for w in uncased.tokenize("中国人").to_list()] == [1, 1, 1]
    assert pieces(uncased, "정말 좋아요") == [NFD("정말"), NFD("좋"), "##" + NFD("아요")]
    # Emoji are symbols (So), not punctuation: BERT keeps them inside the
    # word, and a word that cannot be pieced together is one [UNK].
    assert pieces(uncased, "good 😀 🐼") == ["good", "😀", "🐼"]
    assert pieces(uncased, "good😀") == ["[UNK]"]
    assert pieces(uncased, "🤖 good") == ["[UNK]", "good"]
    # Control characters dropped, odd whitespace is a separator.
    assert pieces(uncased, "hello\u00a0world\thello\u3000world") == ["hello", "world"] * 2
    cased = WordPieceTokenizer(vocab_file, lower_case=False)
    assert pieces(cased, "Café Hello hello") == ["Café", "Hello", "hello"]
    assert pieces(cased, "정말 좋아요") == ["정말", "좋", "##아요"]


def test_tf_data_and_tf_function(vocab_file):
    tokenizer = WordPieceTokenizer(vocab_file)
    texts = ["hello world", "unaffable", "中国 정말"]
    expected = tokenizer.tokenize_ids(texts).to_list()

    ds = tf.data.Dataset.from_tensor_slices(texts).map(tokenizer.tokenize_ids)
    assert [list(x.numpy()) for x in ds] == expected
    ds = tf.data.Dataset.from_tensor_slices(texts).batch(2).map(tokenizer.tokenize)
    got = [row for batch in ds for row in batch.merge_dims(-2, -1).to_list()]
    assert got == expected

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def run(x):
        return tokenizer.tokenize(x).merge_dims(-2, -1).to_tensor(-1)

    dense = run(tf.constant(texts)).numpy().tolist()
    assert [[i for i in row if i != -1] for row in dense] == expected


def test_lookups_and_detokenize(vocab_file):
    tokenizer = WordPieceTokenizer(vocab_file)
    assert tokenizer.id_to_token(tokenizer.mask_id) == "[MASK]"
    ids = tokenizer.token_to_id(tf.constant(["hello", "nope"])).numpy().tolist()
    assert ids == [5, tokenizer.unk_id]
    assert tokenizer.id_to_token(tf.constant([5, 6])).numpy().tolist() == [b"hello", b"world"]
    text = tokenizer.detokenize(tokenizer.tokenize_ids(["unaffable hello", "abc"]))
    assert text.numpy().tolist() == [b"unaffable hello", b"abc"]
    special = tokenizer.get_special_tokens_dict()
    assert int(special["start_of_sequence_id"]) == tokenizer.cls_id


def test_saved_model_round_trip(vocab_file, tmp_path):
    tokenizer = WordPieceTokenizer(vocab_file)
    tokenizer.serve = tf.function(
        lambda x: tokenizer.tokenize_ids(x).to_tensor(),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    tf.saved_model.save(tokenizer, str(tmp_path / "sm"))
    assert (tmp_path / "sm" / "assets" / "vocab.txt").exists()
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    got = loaded.serve(tf.constant(["hello world", "abc"])).numpy().tolist()
    assert got == tokenizer.tokenize_ids(["hello world", "abc"]).to_tensor().numpy().tolist()


def _reference_bert_normalize(text, lower_case):
    # google-research/bert tokenization.py: _clean_text, then lower() and
    # _run_strip_accents (NFD, drop Mn) for uncased.
    out = []
    for char in text:
        cat = unicodedata.category(char)
        if char in "\t\n\r" or cat == "Zs":
            out.append(" ")
        elif ord(char) == 0 or ord(char) == 0xFFFD or cat.startswith("C"):
            continue
        else:
            out.append(char)
    text = "".join(out)
    if lower_case:
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(c for c in text if unicodedata.category(c) != "Mn")
    return text


@pytest.mark.parametrize("lower_case", [True, False])
def test_bert_normalize_matches_reference(lower_case):
    from kerasbert.text.tokenizer import bert_normalize

    texts = [
        "Ａ（ﬁ）＝ＡＢＣ", "Straße İstanbul ÅNGSTRÖM", "پلی\u200cنزی", "a\u00a0b\u3000c",
        "x\x00y\x07z\ufffd", "Ελληνικά ΆΈΉ", "Hangul 한국어 ÇA", "emoji 👍🏽 👨‍👩‍👧",
    ]
    got = [t.decode("utf-8") for t in bert_normalize(tf.constant(texts), lower_case).numpy()]
    # Whitespace runs only matter as separators.
    expected = [_reference_bert_normalize(t, lower_case) for t in texts]
    assert [g.replace("\t", " ") for g in got] == expected


@pytest.mark.parametrize("lower_case", [True, False])
def test_tokenize_with_offsets_point_into_original_text(vocab_file, lower_case):
    tokenizer = WordPieceTokenizer(vocab_file, lower_case=lower_case)
    texts = [
        "Hello  CAFÉ, world!",           # case + accent change lengths
        "",
        "정말 좋아요 中国\u200bhello",     # Hangul (NFD when uncased), CJK, zero-width char
        "x\u00a0naive 😀 unaffable",      # NBSP, emoji, pieces of one word
    ]
    ids, starts, ends = tokenizer.tokenize_with_offsets(texts)
    assert ids.to_list() == tokenizer.tokenize_ids(texts).to_list()
    spans = [
        [text[s:e] for s, e in zip(row_s, row_e)]
        for text, row_s, row_e in zip(texts, starts.to_list(), ends.to_list())
    ]
    if lower_case:
        assert spans[0] == ["Hello", "CAFÉ", ",", "world", "!"]
    else:
        assert spans[0][2:] == [",", "world", "!"]
    assert spans[1] == []
    assert spans[2] == ["정말", "좋", "아요", "中", "国", "hello"]
    assert spans[3] == ["x", "naive", "😀", "un", "aff", "able"]
    # Scalar input and graph mode give the same offsets.
    one = tokenizer.tokenize_with_offsets(texts[0])
    graph = tf.function(tokenizer.tokenize_with_offsets)(tf.constant(texts))
    assert one[1].numpy().tolist() == starts[0].numpy().tolist()
    assert graph[2].to_list() == ends.to_list()
