import numpy as np
import pytest
import tensorflow as tf

from kerasbert.text import BertPacker
from kerasbert.text.packer import pair_lengths

CLS, SEP, PAD = 101, 102, 0


def rag(rows):
    return tf.ragged.constant(rows, dtype=tf.int32)


def as_lists(outputs):
    return {k: v.numpy().tolist() for k, v in outputs.items()}


def test_single_segment_padding_and_mask():
    packer = BertPacker(6, CLS, SEP, PAD)
    out = as_lists(packer(rag([[7, 8], [7, 8, 9, 10, 11, 12]])))
    assert out["input_word_ids"] == [[101, 7, 8, 102, 0, 0], [101, 7, 8, 9, 10, 102]]
    assert out["input_mask"] == [[1, 1, 1, 1, 0, 0], [1] * 6]
    assert out["input_type_ids"] == [[0] * 6, [0] * 6]
    for value in packer(rag([[1]])).values():
        assert value.dtype == tf.int32 and value.shape == (1, 6)


def test_pair_type_ids_and_truncation():
    packer = BertPacker(8, CLS, SEP, PAD)
    out = as_lists(packer(rag([[1, 2], [1, 2, 3, 4, 5, 6]]), rag([[7], [7, 8]])))
    assert out["input_word_ids"] == [
        [101, 1, 2, 102, 7, 102, 0, 0],
        # Budget 5: the longer `a` is cut to 3, `b` keeps its 2.
        [101, 1, 2, 3, 102, 7, 8, 102],
    ]
    assert out["input_type_ids"] == [[0, 0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 0, 1, 1, 1]]
    assert out["input_mask"] == [[1] * 6 + [0, 0], [1] * 8]


def _reference_truncate(a, b, budget):
    # google-research/bert run_classifier.py _truncate_seq_pair.
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        (a if len(a) > len(b) else b).pop()
    return len(a), len(b)


def test_pair_lengths_match_original_bert():
    cases = [(la, lb, budget) for la in range(0, 9) for lb in range(0, 9) for budget in (0, 1, 4, 7)]
    la, lb, budgets = (np.array(x, np.int64) for x in zip(*cases))
    for budget in (0, 1, 4, 7):
        sel = budgets == budget
        ka, kb = pair_lengths(tf.constant(la[sel]), tf.constant(lb[sel]), budget)
        expected = [_reference_truncate(range(x), range(y), budget) for x, y in zip(la[sel], lb[sel])]
        assert list(zip(ka.numpy().tolist(), kb.numpy().tolist())) == expected


def test_tie_truncates_b_first():
    out = BertPacker(12, CLS, SEP, PAD)(rag([[1] * 5]), rag([[2] * 5]))
    ids = out["input_word_ids"].numpy()[0].tolist()
    assert ids.count(1) == 5 and ids.count(2) == 4


def test_words_dense_and_unbatched_inputs():
    packer = BertPacker(5, CLS, SEP, PAD)
    words = tf.ragged.constant([[[1, 2], [3]]], dtype=tf.int64)
    assert packer(words)["input_word_ids"].numpy().tolist() == [[101, 1, 2, 3, 102]]
    single = packer(tf.constant([4, 5]))
    assert single["input_word_ids"].numpy().tolist() == [101, 4, 5, 102, 0]


def test_in_tf_data_and_graph():
    packer = BertPacker(6, CLS, SEP, PAD)
    a = rag([[1, 2, 3], [4]])
    b = rag([[5], [6, 7, 8, 9, 10]])
    expected = as_lists(packer(a, b))
    ds = tf.data.Dataset.from_tensor_slices((a, b)).batch(2).map(packer)
    assert as_lists(next(iter(ds))) == expected
    graph = tf.function(packer.__call__)
    assert as_lists(graph(a, b)) == expected
    # One example per element (unbatched) inside map.
    ds = tf.data.Dataset.from_tensor_slices((a, b)).map(lambda x, y: packer(x, y))
    rows = [as_lists(x)["input_word_ids"] for x in ds]
    assert rows == expected["input_word_ids"]


def test_from_tokenizer_and_bad_length(tmp_path):
    from kerasbert.text import WordPieceTokenizer

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hi"]) + "\n")
    tokenizer = WordPieceTokenizer(vocab)
    packer = BertPacker.from_tokenizer(tokenizer, 5)
    out = packer(tokenizer.tokenize_ids(["hi hi hi"]), tokenizer.tokenize_ids(["hi"]))
    assert out["input_word_ids"].numpy().tolist() == [[2, 5, 3, 5, 3]]
    with pytest.raises(ValueError, match="sequence_length"):
        BertPacker(1, CLS, SEP, PAD)
