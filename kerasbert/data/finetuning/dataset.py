"""`make_dataset`: `TaskFeatures` -> a tf.data.Dataset ready for `model.fit`."""

from kerasbert.data.finetuning.features import MODEL_INPUTS


def make_dataset(features, batch_size, shuffle=False, seed=None, drop_remainder=False,
                 labels=True, repeat=False):
    """Batches of `(x, y)`, `(x, y, sample_weight)` (tagging) or `x` alone.

    Args:
        features: `TaskFeatures`.
        batch_size: examples per batch.
        shuffle: shuffle every epoch (the whole set: features are in memory).
        seed: shuffle seed (deterministic order per seed).
        labels: False, or features without labels: yields x only (predict).
        repeat: repeat forever (steps per epoch then come from the caller).

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
    dataset = tf.data.Dataset.from_tensor_slices(elements)
    if shuffle:
        dataset = dataset.shuffle(len(features), seed=seed, reshuffle_each_iteration=True)
    if repeat:
        dataset = dataset.repeat()
    return dataset.batch(batch_size, drop_remainder=drop_remainder).prefetch(tf.data.AUTOTUNE)
