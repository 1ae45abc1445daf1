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


def _combine_segments_reference(packer, a, b, length):
    """tensorflow-text's `combine_segments` + `pad_model_inputs` on the
    same kept lengths: the packer's ids before it used dense ops."""
    import tensorflow_text as tf_text

    def keep(segment, lengths):
        return tf.ragged.boolean_mask(
            segment, tf.ragged.range(segment.row_lengths()) < lengths[:, tf.newaxis])

    if b is None:
        segments = [keep(a, tf.fill([a.nrows()], tf.cast(length - 2, tf.int64)))]
    else:
        keep_a, keep_b = pair_lengths(a.row_lengths(), b.row_lengths(),
                                      length - 2 - packer.pair_separators)
        b = keep(b, keep_b)
        if packer.pair_separators == 2:
            b = tf.concat([tf.fill([b.nrows(), 1], packer.sep_id), b], axis=1)
        segments = [keep(a, keep_a), b]
    ids, types = tf_text.combine_segments(segments, start_of_sequence_id=packer.cls_id,
                                          end_of_segment_id=packer.sep_id)
    word_ids, mask = tf_text.pad_model_inputs(ids, length, pad_value=packer.pad_id)
    types, _ = tf_text.pad_model_inputs(types * packer.second_type_id, length, pad_value=0)
    return {"input_word_ids": word_ids.numpy().tolist(), "input_mask": mask.numpy().tolist(),
            "input_type_ids": types.numpy().tolist()}


@pytest.mark.parametrize("roberta", [False, True])
def test_dense_packing_equals_combine_segments(roberta):
    """Random lengths (empty segments, exact fits, long ones), single and
    pairs, T as an int and as a tensor: the ids of tensorflow-text's ops."""
    from kerasbert.text.roberta_packer import RobertaPacker

    rng = np.random.default_rng(0)
    kind = RobertaPacker if roberta else BertPacker
    for length in (4, 5, 9, 16):
        packer = kind(length, 0 if roberta else CLS, 2 if roberta else SEP, 1 if roberta else PAD)
        a = rag([list(rng.integers(5, 99, n)) for n in rng.integers(0, 20, 40)])
        b = rag([list(rng.integers(5, 99, n)) for n in rng.integers(0, 20, 40)])
        for second in (None, b):
            expected = _combine_segments_reference(packer, a, second, length)
            assert as_lists(packer(a, second)) == expected
            traced = tf.function(lambda x, y, t: packer(x, y, sequence_length=t))
            assert as_lists(traced(a, second, tf.constant(length))) == expected
    empty = BertPacker(6, CLS, SEP, PAD)(rag([[1]])[:0], rag([[1]])[:0])
    assert empty["input_word_ids"].shape == (0, 6)
