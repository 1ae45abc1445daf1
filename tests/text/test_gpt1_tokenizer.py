"""GPT-1's tokenizer gives the ids and offsets of Hugging Face's
`OpenAIGPTTokenizerFast` pipeline (the `tokenizers` library's
BertNormalizer(lowercase) + BertPreTokenizer + BPE with "</w>" word ends)
on the multilingual sample; its files are recognised wherever a model
directory names them, and it works inside an exported SavedModel."""

import json

import pytest
import tensorflow as tf

import adversarial_sample
import multilingual_sample as corpus
from kerasbert.text import Gpt1Tokenizer
from kerasbert.text import load_tokenizer
from kerasbert.text.tokenizer_loading import load_saved_tokenizer
from kerasbert.text.tokenizer_loading import make_packer
from kerasbert.text.tokenizer_loading import save_tokenizer_files

tokenizers = pytest.importorskip("tokenizers")


def gpt1_pipeline():
    """What `OpenAIGPTTokenizerFast` builds around the BPE model."""
    from tokenizers import decoders, models, normalizers, pre_tokenizers

    tok = tokenizers.Tokenizer(models.BPE(unk_token="<unk>", end_of_word_suffix="</w>"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.BPEDecoder(suffix="</w>")
    return tok


@pytest.fixture(scope="module")
def lines():
    return corpus.multilingual_lines(min_lines=3000, faker_per_locale=40)


@pytest.fixture(scope="module")
def gpt1_dir(tmp_path_factory, lines):
    """A GPT-1 model directory as the Hub has it: config.json, vocab.json,
    merges.txt and tokenizer.json, trained on a third of the sample (the
    rest brings unseen words and characters outside the vocabulary)."""
    from tokenizers import trainers

    root = tmp_path_factory.mktemp("openai_gpt")
    reference = gpt1_pipeline()
    reference.train_from_iterator(lines[::3], trainers.BpeTrainer(
        vocab_size=3000, special_tokens=["<unk>"], end_of_word_suffix="</w>"))
    reference.model.save(str(root))
    reference.save(str(root / "tokenizer.json"))
    (root / "config.json").write_text(json.dumps({"model_type": "openai-gpt"}))
    return root


@pytest.fixture(scope="module")
def reference(gpt1_dir):
    return tokenizers.Tokenizer.from_file(str(gpt1_dir / "tokenizer.json"))


@pytest.fixture(scope="module")
def ours(gpt1_dir):
    tokenizer = load_tokenizer(str(gpt1_dir))
    assert isinstance(tokenizer, Gpt1Tokenizer)
    return tokenizer


def test_ids_and_offsets_equal_the_tokenizers_library(lines, reference, ours):
    expected = reference.encode_batch(lines)
    ids, starts, ends = ours.tokenize_with_offsets(lines)
    assert ids.to_list() == [e.ids for e in expected]
    assert ours.tokenize_ids(lines).to_list() == ids.to_list()
    spans = [list(zip(s, e)) for s, e in zip(starts.to_list(), ends.to_list())]
    assert spans == [[tuple(o) for o in e.offsets] for e in expected]
    flat = {i for row in ids.to_list() for i in row}
    assert ours.unk_id in flat and len(flat) > 1000  # unseen characters and a real spread


def test_special_tokens_are_appended_after_the_published_ids(gpt1_dir, ours):
    published = json.loads((gpt1_dir / "vocab.json").read_text(encoding="utf-8"))
    assert ours.published_size == len(published)
    assert ours.vocabulary_size == len(published) + 4
    added = {ours.cls_id, ours.sep_id, ours.pad_id, ours.mask_id}
    assert added == set(ours.added_ids) == set(range(len(published), len(published) + 4))
    assert [ours.id_to_token(i) for i in (ours.cls_id, ours.sep_id, ours.pad_id, ours.mask_id)] \
        == ["<s>", "</s>", "<pad>", "<mask>"]
    assert ours.unk_id == published["<unk>"]
    # User text cannot inject them.
    assert not set(ours.tokenize_ids("<s> a <mask> </s>").numpy().tolist()) & added


def test_words_end_at_word_end_pieces(ours):
    words = ours.tokenize(["tokenization of unbelievable words", ""]).to_list()
    assert len(words[0]) == 4 and words[1] == []
    for word in words[0]:
        pieces = [ours.id_to_token(i) for i in word]
        assert pieces[-1].endswith("</w>") and not any(p.endswith("</w>") for p in pieces[:-1])
    assert ours.detokenize(ours.tokenize_ids(["Hello, World."])).numpy()[0] == b"hello , world ."


def test_packs_like_bert_with_its_added_tokens(ours):
    packer = make_packer(ours, 12)
    ids = ours.tokenize_ids(["a b", "c"])
    packed = packer(ids[:1], ids[1:])
    row = packed["input_word_ids"][0].numpy().tolist()
    assert row[0] == ours.cls_id and row.count(ours.sep_id) == 2 and row[-1] == ours.pad_id


def test_files_round_trip_through_a_run_directory_and_a_saved_model(tmp_path, lines, ours):
    (tmp_path / "run").mkdir()
    description = save_tokenizer_files(ours, str(tmp_path / "run"))
    assert description["type"] == "gpt1_bpe"
    again = load_saved_tokenizer(str(tmp_path / "run"), {"tokenizer": description})
    assert isinstance(again, Gpt1Tokenizer)
    expected = ours.tokenize_ids(lines[:200]).to_list()
    assert again.tokenize_ids(lines[:200]).to_list() == expected

    module = tf.Module()
    module.tokenizer = ours
    module.tokenize = tf.function(lambda t: ours.tokenize_ids(t),
                                  input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, str(tmp_path / "saved"))
    loaded = tf.saved_model.load(str(tmp_path / "saved"))
    assert loaded.tokenize(tf.constant(lines[:200])).to_list() == expected


def test_a_tokenizer_json_alone_is_enough(tmp_path, gpt1_dir, lines, ours, monkeypatch):
    monkeypatch.setenv("KERASBERT_CACHE", str(tmp_path / "cache"))
    (tmp_path / "json_only").mkdir()
    for name in ("tokenizer.json", "config.json"):
        (tmp_path / "json_only" / name).write_bytes((gpt1_dir / name).read_bytes())
    from_json = load_tokenizer(str(tmp_path / "json_only"))
    assert isinstance(from_json, Gpt1Tokenizer)
    assert from_json.tokenize_ids(lines[:300]).to_list() == ours.tokenize_ids(lines[:300]).to_list()


def test_bad_files_name_the_problem(tmp_path, gpt1_dir):
    (tmp_path / "vocab.json").write_bytes((gpt1_dir / "vocab.json").read_bytes())
    merges = (gpt1_dir / "merges.txt").read_text(encoding="utf-8")
    (tmp_path / "merges.txt").write_text(merges + "qqq zzz</w>\n", encoding="utf-8")
    with pytest.raises(ValueError, match="makes 'qqqzzz</w>', which is not in"):
        Gpt1Tokenizer(tmp_path / "vocab.json", tmp_path / "merges.txt")
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b c\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2: a merge rule is two tokens"):
        Gpt1Tokenizer(tmp_path / "vocab.json", tmp_path / "merges.txt")


@pytest.mark.parametrize("on", [True, False], ids=["specials_on", "specials_off"])
def test_adversarial_sample_in_both_settings(lines, gpt1_dir, reference, on):
    """Long words, special-token strings, control characters, empty lines:
    the ids and offsets of `tokenizers` with its special-token matching on
    (the published <unk> only: ours appended are no strings of the source)
    or off (encode_special_tokens)."""
    texts = adversarial_sample.adversarial_lines(lines=lines)
    ours = load_tokenizer(str(gpt1_dir), special_tokens_in_strings=on)
    reference.encode_special_tokens = not on
    try:
        expected = reference.encode_batch(texts)
    finally:
        reference.encode_special_tokens = False
    ids, starts, ends = ours.tokenize_with_offsets(texts)
    assert ids.to_list() == [e.ids for e in expected]
    spans = [list(zip(s, e)) for s, e in zip(starts.to_list(), ends.to_list())]
    assert spans == [[tuple(o) for o in e.offsets] for e in expected]
    assert (ours.tokenize_ids("<unk>").numpy().tolist() == [ours.unk_id]) is on
