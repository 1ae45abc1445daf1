import json
import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from kerasbert.text.bpe_training import train_bpe
from kerasbert.text.byte_pair_tokenizer import BytePairTokenizer
from kerasbert.text.roberta_packer import RobertaPacker
from tests.text.multilingual_sample import EMOJI_LINES
from tests.text.multilingual_sample import multilingual_lines

from slow_marks import slow_covered_by

# Edge cases of GPT-2's pre-tokenization regex: runs of spaces, newlines and
# tabs before words and at the end, Unicode spaces (NBSP, ideographic),
# contractions, combining accents, split multi-byte characters, text that
# looks like special tokens.
EDGE_LINES = [
    "",
    "   ",
    "\n",
    "Hello  world\n\nthe fox 😀x",
    " café  ",
    "don't 's  'll it's",
    "a\u00a0b\u3000c \u2009d",
    "tab\there \t\n x\r\n",
    "aaaa bbbb ====== ...!!!",
    "naïve cafe\u0301 — “quotes” 123 4567",
    "The lazy dog's 're ''s",
    "<s> fill the <mask> </s>",
    "한국어 영화 리뷰가 좋아요!!",
    "日本語の中文テスト",
]


@pytest.fixture(scope="module")
def lines():
    return multilingual_lines()


@pytest.fixture(scope="module")
def bpe_files(tmp_path_factory, lines):
    corpus = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    corpus.write_text("\n".join(lines[::3]) + "\n", encoding="utf-8")
    out = tmp_path_factory.mktemp("bpe")
    return train_bpe([str(corpus)], 400, str(out))


@pytest.fixture(scope="module")
def tokenizer(bpe_files):
    return BytePairTokenizer(bpe_files["vocabulary_file"], bpe_files["merges_file"])


def hf_tokenizer(files, trim_offsets):
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers import processors

    hf = ByteLevelBPETokenizer(files["vocabulary_file"], files["merges_file"])
    # RoBERTa's own post-processor trims with add_prefix_space=False.
    hf._tokenizer.post_processor = processors.ByteLevel(
        trim_offsets=trim_offsets, add_prefix_space=False
    )
    return hf


def test_trained_layout(bpe_files, tokenizer):
    with open(bpe_files["vocabulary_file"], encoding="utf-8") as f:
        vocab = json.load(f)
    assert len(vocab) == tokenizer.vocabulary_size == 400
    assert [tokenizer.cls_id, tokenizer.pad_id, tokenizer.sep_id, tokenizer.unk_id] == [0, 1, 2, 3]
    assert tokenizer.mask_id == 399 and tokenizer.vocabulary[-1] == "<mask>"
    assert tokenizer.lower_case is False
    assert tokenizer.id_to_token(0) == "<s>" and tokenizer.token_to_id("</s>") == 2
    special = {k: int(v) for k, v in tokenizer.get_special_tokens_dict().items()}
    assert special == {
        "padding_id": 1, "start_of_sequence_id": 0, "end_of_segment_id": 2,
        "mask_id": 399, "vocab_size": 400,
    }
    with open(bpe_files["merges_file"], encoding="utf-8") as f:
        assert f.readline().startswith("#version")


@pytest.mark.parametrize("trim", [True, False])
def test_ids_and_offsets_equal_hf_tokenizers(bpe_files, lines, trim):
    ours = BytePairTokenizer(
        bpe_files["vocabulary_file"], bpe_files["merges_file"], trim_offsets=trim
    )
    hf = hf_tokenizer(bpe_files, trim)
    sample = EDGE_LINES + list(EMOJI_LINES) + lines[1::40]
    ids, starts, ends = ours.tokenize_with_offsets(sample)
    expected = hf.encode_batch(sample)
    for i, (text, enc) in enumerate(zip(sample, expected)):
        assert ids[i].numpy().tolist() == enc.ids, text
        offsets = list(zip(starts[i].numpy().tolist(), ends[i].numpy().tolist()))
        assert offsets == enc.offsets, text
    assert ours.tokenize_ids(sample[:40]).to_list() == ids[:40].to_list()


# ~5 s: tracing keras-hub's BytePairTokenizer on these files' edge lines; the default suite
# compares these files with tokenizers, and keras-hub's RoBERTa graph path with ours.
@slow_covered_by(
    "tests/text/test_byte_pair_tokenizer.py::test_ids_and_offsets_equal_hf_tokenizers",
    "tests/text/test_keras_hub_tokenizer_parity.py::test_keras_hub_albert_and_roberta_presets_on_a_sample")
def test_ids_equal_keras_hub_graph_tokenizer(bpe_files, tokenizer):
    import keras_hub

    peer = keras_hub.tokenizers.BytePairTokenizer(
        bpe_files["vocabulary_file"], bpe_files["merges_file"], unsplittable_tokens=[]
    )
    # keras-hub's tf.data (graph) path is its GPT-2 implementation; its
    # eager path runs HF with a Llama-3 pre-tokenizer and differs.
    sample = [t for t in EDGE_LINES if t.strip()] + list(EMOJI_LINES)
    peer_ids = [x.numpy().tolist() for x in tf.data.Dataset.from_tensor_slices(sample).map(peer)]
    assert peer_ids == tokenizer.tokenize_ids(sample).to_list()


def test_offsets_point_into_the_original_text(tokenizer):
    text = "Ça va? 정말 최고 👍 ok"
    ids, starts, ends = tokenizer.tokenize_with_offsets(text)
    spans = list(zip(starts.numpy().tolist(), ends.numpy().tolist()))
    # Pieces of one split character (the emoji's bytes) share its span.
    distinct = [span for i, span in enumerate(spans) if i == 0 or span != spans[i - 1]]
    assert "".join(text[s:e] for s, e in distinct) == text.replace(" ", "")
    # Trimmed offsets: a piece of spaces only ("Ġ") has an empty span.
    assert all(e > s for (s, e), i in zip(spans, ids.numpy()) if tokenizer.id_to_token(int(i)) != "\u0120")
    thumb = text.index("👍")
    assert spans.count((thumb, thumb + 1)) == 4  # Its 4 UTF-8 bytes.
    assert ids.shape.rank == 1  # A scalar text gives dense vectors.


def test_words_start_at_space_pieces(tokenizer):
    words = tokenizer.tokenize(["the cat sat", "x"])
    assert words.shape.rank == 3
    assert words.row_lengths().numpy().tolist() == [3, 1]
    first = [tokenizer.id_to_token(int(p)) for p in words[0, 1].numpy()]
    assert first[0].startswith("\u0120")
    assert words.merge_dims(-2, -1).to_list() == tokenizer.tokenize_ids(["the cat sat", "x"]).to_list()
    starts = tokenizer.starts_word(tokenizer.tokenize_ids(["the cat"]))
    assert starts.to_list()[0][0] is True


def test_detokenize_restores_bytes(tokenizer):
    sample = EDGE_LINES + list(EMOJI_LINES)
    ids = tokenizer.tokenize_ids(sample)
    assert [t.decode("utf-8") for t in tokenizer.detokenize(ids).numpy()] == sample
    dense = ids.to_tensor(tokenizer.pad_id)
    assert tokenizer.detokenize(dense).numpy()[3].decode() == sample[3]
    assert tokenizer.detokenize(ids[3]).numpy().decode() == sample[3]


def test_in_tf_data(tokenizer):
    ds = tf.data.Dataset.from_tensor_slices(EDGE_LINES).map(tokenizer.tokenize_ids)
    got = [x.numpy().tolist() for x in ds]
    assert got == tokenizer.tokenize_ids(EDGE_LINES).to_list()


def export_tokenizer(tmp_path, bpe_files):
    """Saves tokenizer + packer from private copies of the files, then
    removes the copies: the SavedModel must carry them as assets."""
    vocab = tmp_path / "src" / "vocab.json"
    merges = tmp_path / "src" / "merges.txt"
    vocab.parent.mkdir()
    vocab.write_bytes(open(bpe_files["vocabulary_file"], "rb").read())
    merges.write_bytes(open(bpe_files["merges_file"], "rb").read())
    module = tf.Module()
    module.tokenizer = BytePairTokenizer(vocab, merges)
    module.packer = RobertaPacker.from_tokenizer(module.tokenizer, 16)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)] * 2)
    def pack(a, b):
        tok = module.tokenizer
        return module.packer(tok.tokenize_ids(a), tok.tokenize_ids(b))

    module.pack = pack
    export = tmp_path / "saved"
    tf.saved_model.save(module, str(export))
    os.remove(vocab)
    os.remove(merges)
    assert sorted(os.listdir(export / "assets")) == ["merges.txt", "vocab.json"]
    a, b = ["Hello  world 😀", "정말 최고"], ["don't stop", ""]
    expected = {k: v.numpy().tolist() for k, v in pack(a, b).items()}
    return export, a, b, expected


# ~6-12 s: trace, save, load and first run of the tokenizer and packer graph; the default
# suite serves a RoBERTa export whose source files are deleted, and a BPE SavedModel.
@slow_covered_by("tests/serving/test_export_families.py::test_pair_export_in_process",
                 "tests/text/test_source_tokenizer_parity.py::test_bpe_tokenizer_json_on_a_sample")
def test_saved_model_is_self_contained(tmp_path, bpe_files):
    export, a, b, expected = export_tokenizer(tmp_path, bpe_files)
    loaded = tf.saved_model.load(str(export))
    got = loaded.pack(tf.constant(a), tf.constant(b))
    assert {k: v.numpy().tolist() for k, v in got.items()} == expected


# ~15-30 s: a second Python process with only tensorflow and tensorflow_text; the default
# suite serves a RoBERTa export in process and a WordPiece export in a TF-only process.
@slow_covered_by("tests/serving/test_export_families.py::test_pair_export_in_process",
                 "tests/serving/test_qa_serving.py::test_parity_version_2_fresh_process")
def test_saved_model_loads_with_tensorflow_text_only(tmp_path, bpe_files):
    export, a, b, expected = export_tokenizer(tmp_path, bpe_files)
    script = textwrap.dedent(
        f"""
        import json, sys
        import tensorflow as tf
        import tensorflow_text  # noqa: F401  (registers the ops)
        loaded = tf.saved_model.load({str(export)!r})
        out = loaded.pack(tf.constant({a!r}), tf.constant({b!r}))
        assert "kerasbert" not in sys.modules and "keras_hub" not in sys.modules
        print(json.dumps({{k: v.numpy().tolist() for k, v in out.items()}}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected


def test_bad_files_name_the_problem(tmp_path, bpe_files):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        BytePairTokenizer(tmp_path / "nope.json", bpe_files["merges_file"])
    vocab = tmp_path / "vocab.json"
    vocab.write_text(json.dumps({"a": 0, "b": 1}), encoding="utf-8")
    with pytest.raises(ValueError, match="<s>, <pad>"):
        BytePairTokenizer(vocab, bpe_files["merges_file"])
    # A merge rule whose result the vocabulary lacks names both files.
    tokens = json.loads(open(bpe_files["vocabulary_file"], encoding="utf-8").read())
    merges = tmp_path / "merges.txt"
    merges.write_text("#version: 0.2\nqqq zzz\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"merges.txt: merge 1 \('qqq zzz'\) makes 'qqqzzz', "
                                         r"which is not in .*vocab.json"):
        BytePairTokenizer(bpe_files["vocabulary_file"], merges)
    assert "qqqzzz" not in tokens


def test_train_bpe_rejects_bad_input(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world\n", encoding="utf-8")
    with pytest.raises(ValueError, match="at least 261"):
        train_bpe([str(corpus)], 100, str(tmp_path / "out"))
    with pytest.raises(ValueError, match="missing.txt"):
        train_bpe([str(tmp_path / "missing.txt")], 500, str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


class TestRobertaPacker:
    def test_single_and_pair_layout(self):
        packer = RobertaPacker(sequence_length=10, start_id=0, end_id=2, pad_id=1)
        out = packer(tf.ragged.constant([[5, 6, 7]]))
        assert out["input_word_ids"].numpy().tolist() == [[0, 5, 6, 7, 2, 1, 1, 1, 1, 1]]
        assert out["input_mask"].numpy().tolist() == [[1] * 5 + [0] * 5]
        pair = packer(tf.ragged.constant([[5, 6]]), tf.ragged.constant([[8, 9]]))
        assert pair["input_word_ids"].numpy().tolist() == [[0, 5, 6, 2, 2, 8, 9, 2, 1, 1]]
        assert pair["input_type_ids"].numpy().tolist() == [[0] * 10]
        assert pair["input_mask"].numpy().tolist() == [[1] * 8 + [0] * 2]

    def test_pair_matches_hf_roberta_processing(self, bpe_files, tokenizer):
        from tokenizers import processors

        hf = hf_tokenizer(bpe_files, True)
        hf._tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
        a, b = "the first text", "and the second 😀"
        expected = hf.encode(a, b).ids
        packer = RobertaPacker.from_tokenizer(tokenizer, len(expected))
        got = packer(tokenizer.tokenize_ids([a]), tokenizer.tokenize_ids([b]))
        assert got["input_word_ids"].numpy()[0].tolist() == expected

    def test_longest_first_truncation(self):
        packer = RobertaPacker(sequence_length=9, start_id=0, end_id=2, pad_id=1)
        a = tf.ragged.constant([[10, 11, 12, 13, 14, 15], [10, 11]])
        b = tf.ragged.constant([[20, 21], [20, 21, 22, 23, 24, 25]])
        ids = packer(a, b)["input_word_ids"].numpy().tolist()
        # Budget 5: the longer segment is cut first.
        assert ids[0] == [0, 10, 11, 12, 2, 2, 20, 21, 2]
        assert ids[1] == [0, 10, 11, 2, 2, 20, 21, 22, 2]
        single = packer(tf.ragged.constant([list(range(10, 30))]))["input_word_ids"]
        assert single.numpy()[0].tolist() == [0] + list(range(10, 17)) + [2]

    def test_unbatched_and_too_short(self):
        packer = RobertaPacker(sequence_length=6, start_id=0, end_id=2, pad_id=1)
        out = packer(tf.constant([5, 6]))
        assert out["input_word_ids"].numpy().tolist() == [0, 5, 6, 2, 1, 1]
        with pytest.raises(ValueError, match="at least 4 for pairs"):
            packer([[1]], [[2]], sequence_length=3)
