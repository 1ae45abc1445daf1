"""text2text data: source/target files (CSV, TSV, JSONL), WMT through TFDS
(mock data), the built-in reverse-words task, and the token layout, which
the converter (NumPy) and the preprocessor (tf.data, the exported graph's
ops) must build alike."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from ft_fixtures import tokenizer, write_csv, write_jsonl
from kerasbert.data import default_text2text
from kerasbert.data.finetuning import TaskDataError, convert_examples, load_task
from kerasbert.data.finetuning import make_dataset
from kerasbert.data.finetuning.load import parse_task_spec
from kerasbert.data.finetuning.tfds_sources import translation_direction

PAIRS = [["the cat sat on the mat", "mat the on sat cat the"],
         ["paris is the capital of france", "france of capital the is paris"],
         ["정말 좋아요", "좋아요 정말"]]


def test_csv_tsv_jsonl_pairs_load_alike(tmp_path):
    csv_path = write_csv(tmp_path / "pairs.csv", ["source", "target"], PAIRS)
    tsv_path = write_csv(tmp_path / "pairs.tsv", ["src", "tgt"], PAIRS, delimiter="\t")
    jsonl_path = write_jsonl(tmp_path / "pairs.jsonl",
                             [{"source": s, "target": t} for s, t in PAIRS])
    loaded = [load_task(f"csv:{csv_path}", task_type="text2text"),
              load_task(f"tsv:{tsv_path}"),  # inferred from the columns
              load_task(f"jsonl:{jsonl_path}")]
    for data in loaded:
        assert data.task_type == "text2text" and data.label_names is None and data.has_labels
        assert data.examples == [{"source": s, "target": t} for s, t in PAIRS]


def test_named_columns_prediction_and_errors(tmp_path):
    path = write_csv(tmp_path / "de.csv", ["de", "en"], [["die katze", "the cat"]])
    data = load_task(f"csv:{path}", task_type="text2text",
                     columns={"source": "de", "target": "en"})
    assert data.examples == [{"source": "die katze", "target": "the cat"}]
    sources = write_csv(tmp_path / "sources.csv", ["source"], [["the cat"], ["a dog"]])
    unlabelled = load_task(f"csv:{sources}", task_type="text2text", require_labels=False)
    assert not unlabelled.has_labels and unlabelled.examples[1] == {"source": "a dog",
                                                                    "target": None}
    with pytest.raises(TaskDataError, match=r"missing column for target of a text2text task "
                       r"\(tried target, tgt, target_text\)"):
        load_task(f"csv:{sources}", task_type="text2text")
    empty = write_csv(tmp_path / "empty.csv", ["source", "target"], [["a", "b"], ["c", " "]])
    with pytest.raises(TaskDataError, match=r"empty.csv line 3: empty target \(column 'target'\)"):
        load_task(f"csv:{empty}")


def test_wmt14_translate_under_mock_data():
    with tfds.testing.mock_data(num_examples=3):
        de_en = load_task("wmt14_translate/de-en", "validation")
        en_de = load_task("wmt14_translate/en-de", "dev")  # the same pairs, reversed
    assert de_en.task_type == "text2text" and de_en.split == "validation" and len(de_en) == 3
    assert [(e["target"], e["source"]) for e in en_de.examples] == [
        (e["source"], e["target"]) for e in de_en.examples]
    assert all(isinstance(e["source"], str) and e["source"] for e in de_en.examples)
    assert parse_task_spec("wmt14_translate/fr-en") == ("tfds", "wmt14_translate/fr-en")
    configs = ["cs-en", "de-en", "fr-en"]
    assert translation_direction("wmt14_translate/en-fr", configs) == (
        "wmt14_translate/fr-en", "en", "fr")
    with pytest.raises(TaskDataError, match=r"has no ja-en pair; its language pairs are "
                       r"cs-en, de-en, fr-en \(either direction\)"):
        translation_direction("wmt14_translate/ja-en", configs)
    with pytest.raises(TaskDataError, match=r"give the direction as wmt14_translate/SRC-TGT"):
        translation_direction("wmt14_translate/de", configs)


def test_builtin_reverse_words(tmp_path):
    train = load_task("builtin/reverse_words", "train")
    valid = load_task("builtin/reverse_words", "validation")
    assert train.task_type == valid.task_type == "text2text"
    assert len(train) > 1000 and len(valid) > 200
    assert not {e["source"] for e in train.examples} & {e["source"] for e in valid.examples}
    for example in train.examples[:50] + valid.examples[:50]:
        words = example["source"].split()
        assert 4 <= len(words) <= default_text2text.MAX_WORDS
        assert example["target"].split() == words[::-1]
        # Its own inverse: the target reversed is the source.
        assert default_text2text.reverse_words(example["target"]) == example["source"]
    written = default_text2text.write_default_text2text(str(tmp_path))
    assert written["counts"] == {"train": len(train), "validation": len(valid)}
    from_file = load_task(f"tsv:{written['validation']}")
    assert from_file.task_type == "text2text" and from_file.examples == valid.examples
    with pytest.raises(TaskDataError, match="has the splits train, validation, not 'test'"):
        load_task("builtin/reverse_words", "test")


def test_converter_layout_equals_the_preprocessor(tmp_path):
    from kerasbert.preprocessing import Text2TextPreprocessor

    tok = tokenizer(tmp_path)
    path = write_csv(tmp_path / "pairs.csv", ["source", "target"],
                     PAIRS + [["the river seine flows through paris", "a"]])
    data = load_task(f"csv:{path}")
    features = convert_examples(data, tok, 6, target_length=5)
    start, end = tok.cls_id, tok.sep_id
    pieces = tok.tokenize_ids("the cat sat on the mat").numpy().tolist()
    assert features.x["encoder_token_ids"][0].tolist() == pieces[:5] + [end]
    target = tok.tokenize_ids("mat the on sat").numpy().tolist()
    assert features.x["decoder_token_ids"][0].tolist() == [start] + target
    assert features.y[0].tolist() == target + [end]
    # The short target: [start] a, then padding; its labels: a [end].
    a = int(tok.tokenize_ids("a")[0])
    assert features.x["decoder_token_ids"][3].tolist() == [start, a, 0, 0, 0]
    assert features.x["decoder_padding_mask"][3].tolist() == [1, 1, 0, 0, 0]
    assert features.y[3].tolist() == [a, end, 0, 0, 0]
    assert features.stats["truncated_sources"] == 3 and len(features) == 4

    preprocessor = Text2TextPreprocessor(tok, 6, target_length=5)
    sources, targets = preprocessor.inputs_of(data)
    batches = list(preprocessor.dataset(sources, targets, batch_size=3))
    x = {k: np.concatenate([b[0][k].numpy() for b in batches]) for k in features.x}
    y = np.concatenate([b[1].numpy() for b in batches])
    for name, value in features.x.items():
        np.testing.assert_array_equal(x[name], value, err_msg=name)
    np.testing.assert_array_equal(y, features.y)
    # Features batch as (x, y) with the four encoder-decoder inputs.
    first_x, first_y = next(iter(make_dataset(features, 2)))
    assert sorted(first_x) == sorted(features.x) and first_y.shape == (2, 5)
    # Without targets the decoder starts from [start] alone.
    only = next(iter(preprocessor.dataset(sources[:2], batch_size=2)))
    assert only["decoder_token_ids"].numpy().tolist() == [[start, 0, 0, 0, 0]] * 2


def test_decode_generated_stops_at_the_first_end(tmp_path):
    from kerasbert.preprocessing.text2text_preprocessor import decode_generated

    tok = tokenizer(tmp_path)
    cat, sat = (int(tok.tokenize_ids(w)[0]) for w in ("cat", "sat"))
    end = tok.sep_id
    ids = tf.constant([[cat, sat, end, 0, 0], [end, 0, 0, 0, 0], [sat, sat, sat, sat, sat],
                       [cat, end, sat, end, 0]], tf.int32)
    texts, lengths = decode_generated(tok, ids)
    assert [t.decode() for t in texts.numpy()] == ["cat sat", "", "sat sat sat sat sat", "cat"]
    assert lengths.numpy().tolist() == [2, 0, 5, 1]


def test_create_finetuning_data_caches_text2text_features(tmp_path):
    from ft_fixtures import write_vocab
    from kerasbert.cli import main
    from kerasbert.data.finetuning import read_features, write_features

    vocab = write_vocab(str(tmp_path))
    train = write_csv(tmp_path / "train.tsv", ["source", "target"], PAIRS, delimiter="\t")
    assert main(["create-finetuning-data", "--task", f"tsv:{train}", "--vocab", vocab,
                 "--max-seq-length", "8", "--output-dir", str(tmp_path / "feats")]) == 0
    cached = read_features(str(tmp_path / "feats"), "train")
    expected = convert_examples(load_task(f"tsv:{train}"), tokenizer(tmp_path), 8)
    assert cached.task_type == "text2text" and sorted(cached.x) == sorted(expected.x)
    for name, value in expected.x.items():
        np.testing.assert_array_equal(cached.x[name], value, err_msg=name)
    np.testing.assert_array_equal(cached.y, expected.y)
    # The schema stores the target as long as the source.
    shorter = convert_examples(load_task(f"tsv:{train}"), tokenizer(tmp_path), 8, target_length=6)
    with pytest.raises(TaskDataError, match=r"decoder_token_ids: 6 values per record, but the "
                       r"schema stores \[8\]"):
        write_features(str(tmp_path / "other"), "train", shorter, vocab)
