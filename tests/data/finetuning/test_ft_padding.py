"""Length-aware batches (kerasbert.data.finetuning.padding): each batch cut
to its longest row rounded up to the multiple, every token-axis tensor of
every task kind cut with its own mask, the others left alone; bucketing
seeded, covering every example once per epoch; make_dataset's modes."""

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.data.finetuning import TaskFeatures
from kerasbert.data.finetuning import make_dataset
from kerasbert.data.finetuning.padding import bucket_batches
from kerasbert.data.finetuning.padding import check_padding
from kerasbert.data.finetuning.padding import padded_length
from kerasbert.data.finetuning.padding import padded_width
from kerasbert.data.finetuning.padding import shape_bound
from kerasbert.data.finetuning.padding import trim_batch


def _mask(lengths, width):
    return np.array([[1] * n + [0] * (width - n) for n in lengths], np.int32)


def _features(lengths, width=64):
    mask = _mask(lengths, width)
    ids = mask * np.arange(1, width + 1, dtype=np.int32)
    return {"input_word_ids": tf.constant(ids), "input_mask": tf.constant(mask),
            "input_type_ids": tf.constant(np.zeros_like(mask))}


@pytest.mark.parametrize("lengths, multiple, expected", [
    ([3, 17, 5], 16, 32), ([3, 16], 16, 16), ([1], 8, 8), ([0, 0], 16, 16),
    ([60, 2], 16, 64), ([64], 16, 64), ([9], 1, 9),
])
def test_cut_to_the_longest_row_rounded_up(lengths, multiple, expected):
    x, y, weight = trim_batch(_features(lengths), tf.constant([0, 1, 2][:len(lengths)]),
                              multiple=multiple)
    for name, value in x.items():
        assert value.shape == (len(lengths), expected), name
    # Nothing real is cut: the kept mask holds every real token.
    np.testing.assert_array_equal(x["input_mask"].numpy().sum(-1), lengths)
    assert y.shape == (len(lengths),) and weight is None


def test_per_token_labels_follow_their_mask_and_others_stay():
    x = _features([5, 9])
    tags, weights = tf.ones([2, 64], tf.int32), tf.ones([2, 64], tf.float32)
    _, cut_tags, cut_weights = trim_batch(x, tags, weights, multiple=4)
    assert cut_tags.shape == (2, 12) and cut_weights.shape == (2, 12)
    # QA positions ([B] each) are not token axes.
    positions = {"start_positions": tf.constant([3, 40]), "end_positions": tf.constant([4, 50])}
    _, kept, _ = trim_batch(x, positions, multiple=4)
    assert kept["start_positions"].shape == (2,)


def test_choices_and_encoder_decoder_groups():
    mask = tf.constant(_mask([2, 7, 3, 4], 32).reshape(2, 2, 32))
    x, _, _ = trim_batch({"input_word_ids": mask, "input_mask": mask, "input_type_ids": mask},
                         multiple=8)
    assert x["input_word_ids"].shape == (2, 2, 8)
    source, target = tf.constant(_mask([30, 3], 40)), tf.constant(_mask([5, 2], 24))
    x, labels, _ = trim_batch({"encoder_token_ids": source, "encoder_padding_mask": source,
                               "decoder_token_ids": target, "decoder_padding_mask": target},
                              target, multiple=8)
    assert x["encoder_token_ids"].shape == (2, 32) and x["encoder_padding_mask"].shape == (2, 32)
    assert x["decoder_token_ids"].shape == (2, 8) and labels.shape == (2, 8)


def test_characters_follow_the_word_mask():
    mask = tf.constant(_mask([3, 2], 20))
    chars = tf.ones([2, 20, 50], tf.int32)
    x, tags, _ = trim_batch({"input_char_ids": chars, "input_mask": mask},
                            tf.zeros([2, 20], tf.int32), multiple=4)
    assert x["input_char_ids"].shape == (2, 4, 50) and tags.shape == (2, 4)


def test_the_step_doubles_with_each_doubling_of_the_length():
    """Multiples of m up to 16 m, then steps of 2m, 4m, ...: padding under
    1/8 of the row; the TensorFlow rule (`padded_length`, in tf.data and
    the serving graph) equals the Python one (`padded_width`) everywhere."""
    widths = [padded_width(n, 4096) for n in (1, 8, 9, 128, 129, 256, 257, 300, 513, 4000)]
    assert widths == [8, 8, 16, 128, 144, 256, 288, 320, 576, 4096]
    for n in range(1, 4097):
        assert n <= padded_width(n, 4096) < n + max(8, n / 8)
    for multiple, full in ((1, 40), (8, 700), (12, 500)):
        lengths = tf.range(full + 1)
        masks = tf.cast(tf.range(full)[None, :] < lengths[:, None], tf.int32)
        got = tf.map_fn(lambda m: padded_length(m[None], multiple), masks).numpy()
        assert got.tolist() == [padded_width(n, full, multiple) for n in range(full + 1)]


def test_bound_and_checks():
    assert [shape_bound(t) for t in (128, 384, 512, 8192)] == [16, 28, 32, 64]
    assert [shape_bound(t, 16) for t in (128, 384, 512)] == [8, 20, 24]
    with pytest.raises(ValueError, match="padding='short'"):
        check_padding("short", 16)
    with pytest.raises(ValueError, match="pad_to_multiple_of=0"):
        check_padding("longest", 0)


def _task_features(n=100, width=64, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, width + 1, size=n)
    mask = _mask(lengths, width)
    x = {"input_word_ids": mask * (np.arange(n)[:, None] + 1), "input_mask": mask,
         "input_type_ids": np.zeros_like(mask)}
    return TaskFeatures("classification", x, y=np.arange(n, dtype=np.int32),
                        label_names=[str(i) for i in range(n)], sequence_length=width), lengths


def test_make_dataset_modes_and_buckets():
    features, lengths = _task_features()
    fixed = list(make_dataset(features, 8, padding="max_length").as_numpy_iterator())
    longest = list(make_dataset(features, 8).as_numpy_iterator())
    assert {x["input_word_ids"].shape[1] for x, _ in fixed} == {64}
    for (xf, yf), (xl, yl) in zip(fixed, longest):
        width = xl["input_word_ids"].shape[1]
        assert width % 8 == 0 or width == 64
        np.testing.assert_array_equal(xf["input_word_ids"][:, :width], xl["input_word_ids"])
        assert not xf["input_mask"][:, width:].any()
        np.testing.assert_array_equal(yf, yl)

    def epochs(seed):
        data = make_dataset(features, 8, shuffle=True, seed=seed, bucket_by_length=True,
                            repeat=False)
        return [[y.tolist() for _, y in data.as_numpy_iterator()] for _ in range(2)]

    first, again = epochs(3), epochs(3)
    assert first == again  # seeded: a rerun sees the same batches
    assert first[0] != first[1]  # and every epoch differs
    for epoch in first:
        assert sorted(sum(epoch, [])) == list(range(100))  # each example once
        assert len(epoch) == 13
    # Buckets: the rows of a batch are close in length (random batches are not).
    spread = np.mean([np.ptp(lengths[batch]) for batch in first[0] if len(batch) > 1])
    unbucketed = make_dataset(features, 8, shuffle=True, seed=3)
    random_spread = np.mean([np.ptp(lengths[y]) for _, y in unbucketed.as_numpy_iterator()])
    assert spread < random_spread / 3


def test_bucket_batches_knows_its_length():
    data = tf.data.Dataset.from_tensor_slices(tf.constant(["a" * i for i in range(1, 42)]))
    batches = bucket_batches(data, 8, seed=0, pool_batches=2,
                             length=lambda e: tf.strings.length(e[0]))
    assert int(batches.cardinality()) == 6
    seen = [s for batch in batches.as_numpy_iterator() for s in batch.tolist()]
    assert sorted(len(s) for s in seen) == list(range(1, 42))
