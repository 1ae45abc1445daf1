"""`make_dataset`: `TaskFeatures` -> a tf.data.Dataset ready for `model.fit`."""

from kerasbert.data.finetuning.features import MODEL_INPUTS
from kerasbert.data.finetuning.padding import DEFAULT_MULTIPLE
from kerasbert.data.finetuning.padding import bucket_batches
from kerasbert.data.finetuning.padding import check_padding
from kerasbert.data.finetuning.padding import trim_element


def make_dataset(features, batch_size, shuffle=False, seed=None, drop_remainder=False,
                 labels=True, repeat=False, padding="longest",
                 pad_to_multiple_of=DEFAULT_MULTIPLE, bucket_by_length=False):
    """Batches of `(x, y)`, `(x, y, sample_weight)` (tagging) or `x` alone.

    Args:
        features: `TaskFeatures`.
        batch_size: examples per batch.
        shuffle: shuffle every epoch (the whole set: features are in memory).
        seed: shuffle seed (deterministic order per seed).
        labels: False, or features without labels: yields x only (predict).
        repeat: repeat forever (steps per epoch then come from the caller).
        padding: "longest" (default): each batch cut to its longest row,
            rounded up to `pad_to_multiple_of`; "max_length": every batch
            at the features' T (`kerasbert.data.finetuning.padding`).
        bucket_by_length: with `shuffle`, batches of similar lengths
            (seeded pools of 50 batches, `bucket_batches`).

    x is {"input_word_ids", "input_mask", "input_type_ids"} int32 (text2text:
    its four encoder-decoder inputs); y is the features' y (a dict
    {"start_positions", "end_positions"} for qa).
    """
    import tensorflow as tf

    names = MODEL_INPUTS if MODEL_INPUTS[0] in features.x else tuple(features.x)
    x = {name: features.x[name] for name in names}
    if labels and features.y is not None:
        if features.sample_weight is not None:
            elements = (x, features.y, features.sample_weight)
        else:
            elements = (x, features.y)
    else:
        elements = x
    check_padding(padding, pad_to_multiple_of)
    dataset = tf.data.Dataset.from_tensor_slices(elements)
    if shuffle:
        dataset = dataset.shuffle(len(features), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    if shuffle and bucket_by_length and padding == "longest":
        dataset = bucket_batches(dataset, batch_size, seed=seed, drop_remainder=drop_remainder)
    else:
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
    if padding == "longest":
        dataset = dataset.map(trim_element(pad_to_multiple_of),
                              num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)
