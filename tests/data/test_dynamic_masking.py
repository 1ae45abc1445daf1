"""Dynamic masking: the 15% / 80-10-10 rule, statistically over >= 10,000
sequences read through pretraining_dataset, plus the exact per-sequence
count rule, special ids looked up by string, and new masks every epoch."""

import numpy as np
import pytest
import tensorflow as tf

import reader_records as rr
from kerasbert.data.dynamic_masking import DynamicMasker
from kerasbert.data.reader import pretraining_dataset

T, P = 64, 20
N = 10240


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("vocab") / "vocab.txt")
    rr.write_vocab(path)
    return path


@pytest.fixture(scope="module")
def unmasked(tmp_path_factory, vocab):
    """N `--no-masking` sequences (lengths 8..64) in 2 shards."""
    folder = tmp_path_factory.mktemp("unmasked")
    instances = rr.make_instances(N, T, P, masked=False, seed=1)
    rr.write_shards(str(folder), instances, num_shards=2, sequence_length=T, num_pred=P,
                    vocab_file=vocab)
    return str(folder / "*.tfrecord"), instances


def _epoch(pattern, vocab, seed=5, **kwargs):
    ds = pretraining_dataset(pattern, 512, dynamic_masking=True, vocab_file=vocab,
                             seed=seed, repeat=False, shuffle=False, deterministic=True,
                             **kwargs)
    batches = [{k: v.numpy() for k, v in b.items()} for b in ds]
    return {k: np.concatenate([b[k] for b in batches]) for k in batches[0]}


def test_masking_statistics(unmasked, vocab):
    pattern, instances = unmasked
    out = _epoch(pattern, vocab)
    original = np.array([i["input_ids"] for i in instances])
    assert out["input_word_ids"].shape == original.shape == (N, T)

    special = np.isin(original, [rr.CLS, rr.SEP, rr.PAD])
    maskable = (~special) & (out["input_mask"] == 1)
    weights = out["masked_lm_weights"]
    positions = out["masked_lm_positions"]
    chosen = weights > 0

    # 15% +- 0.5 points of the maskable tokens.
    fraction = chosen.sum() / maskable.sum()
    assert abs(fraction - 0.15) < 0.005, fraction

    # The exact count rule per sequence.
    n = maskable.sum(1)
    expected = np.minimum(P, np.maximum(1, np.round(n * 0.15)))
    np.testing.assert_array_equal(chosen.sum(1), expected)

    # Specials / padding never chosen; weights and positions padded together.
    rows = np.repeat(np.arange(N)[:, None], P, 1)
    assert not special[rows[chosen], positions[chosen]].any()
    assert (positions[~chosen] == 0).all() and (out["masked_lm_ids"][~chosen] == 0).all()
    assert (np.cumsum(~chosen, 1)[chosen] == 0).all(), "real predictions come first"
    for row in range(200):
        k = chosen[row].sum()
        assert (np.diff(positions[row, :k]) > 0).all()

    # masked_lm_ids are the original tokens.
    np.testing.assert_array_equal(out["masked_lm_ids"][chosen],
                                  original[rows[chosen], positions[chosen]])

    # 80 / 10 / 10 +- 2 points.
    now = out["input_word_ids"][rows[chosen], positions[chosen]]
    was = original[rows[chosen], positions[chosen]]
    is_mask = now == rr.MASK
    same = now == was
    assert abs(is_mask.mean() - 0.8) < 0.02
    assert abs(same.mean() - 0.1) < 0.02  # includes ~1/504 random hits
    assert abs((~is_mask & ~same).mean() - 0.1) < 0.02

    # Nothing else changed.
    untouched = np.ones_like(original, bool)
    untouched[rows[chosen], positions[chosen]] = False
    np.testing.assert_array_equal(out["input_word_ids"][untouched], original[untouched])


def test_new_masks_every_epoch(unmasked, vocab):
    pattern, _ = unmasked
    ds = pretraining_dataset(pattern, 256, dynamic_masking=True, vocab_file=vocab,
                             seed=5, repeat=False, shuffle=False, deterministic=True)
    epochs = [next(iter(ds))["masked_lm_positions"].numpy() for _ in range(2)]
    assert (epochs[0] != epochs[1]).any(axis=1).mean() > 0.9
    # ...and a repeating dataset masks the second pass differently too.
    ds = pretraining_dataset(pattern, 512, dynamic_masking=True, vocab_file=vocab,
                             seed=5, repeat=True, shuffle=False, deterministic=True)
    it = iter(ds)
    first = [next(it) for _ in range(N // 512)]
    second = next(it)
    np.testing.assert_array_equal(second["input_mask"], first[0]["input_mask"])
    assert (second["masked_lm_positions"].numpy()
            != first[0]["masked_lm_positions"].numpy()).any(axis=1).mean() > 0.9


def test_count_rule_rounds_half_to_even():
    # n maskable tokens -> min(P, max(1, round(0.15 n))), Python 3 rounding.
    masker = DynamicMasker(vocab_size=200, mask_id=103, special_ids=[0, 101, 102],
                           max_predictions_per_seq=5)
    for n, k in [(1, 1), (3, 1), (10, 2), (30, 4), (50, 5), (100, 5)]:
        ids = np.zeros(110, np.int32)
        ids[0], ids[n + 1] = 101, 102
        ids[1:n + 1] = 150
        mask = (np.arange(110) < n + 2).astype(np.int32)
        out = masker(ids, mask, tf.constant([1, 2]))
        assert k == min(5, max(1, round(n * 0.15)))
        assert int(out["masked_lm_weights"].numpy().sum()) == k, n
        assert out["masked_lm_positions"].shape == (5,)
    # rate_basis="tokens" counts [CLS]/[SEP] like the original creator.
    tokens = DynamicMasker(vocab_size=200, mask_id=103, special_ids=[0, 101, 102],
                           max_predictions_per_seq=20, rate_basis="tokens")
    ids = np.array([101] + [150] * 38 + [102], np.int32)
    out = tokens(ids, np.ones(40, np.int32), tf.constant([3, 4]))
    assert out["masked_lm_weights"].numpy().sum() == 6  # round(40 * .15)


def test_special_ids_looked_up_by_string(tmp_path):
    # A non-original layout: specials at the end of the vocabulary.
    words = [f"t{i}" for i in range(50)]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(words + ["[UNK]", "[SEP]", "[MASK]", "[CLS]", "[PAD]"]) + "\n")
    masker = DynamicMasker.from_vocab_file(str(path), 4)
    assert (masker.mask_id, masker.special_ids, masker.vocab_size) == (52, [51, 53, 54], 55)
    seq = np.array([[53, 5, 6, 7, 8, 51, 9, 10, 51, 54, 54, 54]] * 500, np.int32)
    out = masker(seq, (seq != 54).astype(np.int32), tf.constant([7, 7]))
    pos = out["masked_lm_positions"].numpy()[out["masked_lm_weights"].numpy() > 0]
    assert set(pos.tolist()) <= {1, 2, 3, 4, 6, 7}
    assert (out["input_word_ids"].numpy()[:, [0, 5, 8, 9]] == [53, 51, 51, 54]).all()
    assert 52 in out["input_word_ids"].numpy()  # [MASK] by its looked-up id
    bad = tmp_path / "bad.txt"
    bad.write_text("a\nb\n[CLS]\n")
    with pytest.raises(ValueError, match=r"\[SEP\]"):
        DynamicMasker.from_vocab_file(str(bad), 4)


def test_remasks_statically_masked_files(tmp_path, vocab):
    # Stored masks are undone (masked_lm_ids put back), then new ones drawn.
    instances = rr.make_instances(300, T, P, masked=True, seed=4)
    rr.write_shards(str(tmp_path), instances, num_shards=1, sequence_length=T, num_pred=P)
    out = _epoch(str(tmp_path / "*.tfrecord"), vocab)
    original = np.array([i["input_ids"] for i in instances])
    for i, inst in enumerate(instances):  # the unmasked sequence
        for p, tok, w in zip(inst["masked_lm_positions"], inst["masked_lm_ids"],
                             inst["masked_lm_weights"]):
            if w:
                original[i, p] = tok
    chosen = out["masked_lm_weights"] > 0
    rows = np.repeat(np.arange(len(instances))[:, None], P, 1)
    np.testing.assert_array_equal(out["masked_lm_ids"][chosen],
                                  original[rows[chosen], out["masked_lm_positions"][chosen]])
    untouched = np.ones_like(original, bool)
    untouched[rows[chosen], out["masked_lm_positions"][chosen]] = False
    np.testing.assert_array_equal(out["input_word_ids"][untouched], original[untouched])


def test_whole_word_masking_never_splits_a_word(tmp_path):
    # Vocabulary: specials, 100 word starts "a0..", 100 pieces "##b0..".
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += [f"a{i}" for i in range(100)] + [f"##b{i}" for i in range(100)]
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(tokens) + "\n")
    masker = DynamicMasker.from_vocab_file(str(path), 20, whole_word_mask=True)
    rng = np.random.default_rng(0)
    rows, words = [], []
    for _ in range(2000):  # [CLS] words... [SEP], words of 1-4 pieces
        ids, wid = [2], [-1]
        while len(ids) < 50:
            n = int(rng.integers(1, 5))
            ids += [int(rng.integers(5, 105))] + [int(x) for x in rng.integers(105, 205, n - 1)]
            wid += [len(set(wid))] * n
        ids, wid = ids[:50] + [3], wid[:50] + [-1]
        rows.append(ids + [0] * (64 - len(ids)))
        words.append(wid + [-2] * (64 - len(wid)))
    ids = np.array(rows, np.int32)
    out = masker(ids, (ids != 0).astype(np.int32), tf.constant([5, 6]))
    weights = out["masked_lm_weights"].numpy() > 0
    positions = out["masked_lm_positions"].numpy()
    words = np.array(words)
    maskable = (ids != 0) & (ids != 2) & (ids != 3)
    for r in range(len(ids)):
        chosen = set(positions[r][weights[r]].tolist())
        assert chosen, r
        assert len(chosen) <= min(20, max(1, round(maskable[r].sum() * 0.15)))
        for w in {words[r][p] for p in chosen}:
            # a word cut at position 50 by [SEP] may be shorter; whole anyway
            members = set(np.flatnonzero(words[r] == w).tolist())
            assert members <= chosen, (r, w)
    fraction = weights.sum() / maskable.sum()
    assert 0.12 < fraction <= 0.15, fraction  # skipped words make it a bit lower
