"""Length-aware batches: each batch padded to its longest row, not to T.

A task's features are packed to T (`sequence_length`, the longest a row may
be: 128 for most tasks, 384 for QA), but most text is far shorter: a batch
of 32 short reviews has a longest row of ~40 pieces, so three quarters of
the encoder's work at T = 128 would be spent on padding. The masks already
make padded positions inert (attention never reads a padded key, losses
and metrics weigh only real tokens), so cutting a batch's trailing padding
changes no loss, metric or prediction beyond float rounding; it only stops
paying for it.

    padding="longest"      each batch cut to its longest row rounded up
                           (`padded_width`), at most T (default)
    padding="max_length"   every batch at T (fixed shapes: XLA, TPU,
                           steps_per_execution > 1, and backbones whose
                           attention pattern depends on the length)

The rounding: a longest row L is rounded up to a multiple of
`pad_to_multiple_of` (m = 8) while L <= 16 m (128), and to a step twice as
coarse for each doubling of L beyond (16 up to 256, 32 up to 512, ...), so
padding above 128 stays under 1/8 of L (4.2% on average over L = 129-512,
where multiples of 16 padded 2.7%) and the number of shapes grows with
log T, not T: `shape_bound` gives 16 at T = 128, 28 at 384,
32 at 512, 64 at 8192 (a multiple of 16 everywhere gave 8, 24, 32, 512).
Short texts gain most: on the built-in task's sentences (20.4 pieces) a
bucketed batch of 32 was 28.0 pieces wide at multiples of 16, 24.9 at 8.
TensorFlow's `tf.function` (Keras' train step, with
`reduce_retracing`) traces twice and then takes any length; JAX compiles
each length once, at most that bound.

`bucket_batches` groups examples of similar length (HF `Trainer`'s
`group_by_length`): shuffled, cut into pools of `pool_batches` batches,
each pool sorted by its real tokens (raw text is tokenized a pool at a time
first), batched, and the batches shuffled again, all by one seed, so a run
is reproducible and every epoch differs.

The token axis of each feature is named in one table (`LENGTH_GROUPS`):
the mask that measures it and the keys that share it. The module imports
TensorFlow only inside its tf.data functions: the task models (any Keras
backend) read `DEFAULT_MULTIPLE` and `padded_width` without it.
"""

PADDING_MODES = ("longest", "max_length")
DEFAULT_MULTIPLE = 8
#: widths per doubling of the length beyond 16 x the multiple (see the module).
STEPS_PER_OCTAVE = 16
#: The rounding in words, for the commands' --padding help.
ROUNDING_WORDS = "rounded up to a multiple of 8 (of 16 above 128 tokens, 32 above 256, ...)"

#: mask key -> the feature keys whose last token axis that mask measures
#: (the mask's last axis; ELMo's characters [B, W, C] follow their word mask
#: [B, W] on axis 1).
LENGTH_GROUPS = {
    "input_mask": ("input_word_ids", "input_mask", "input_type_ids", "input_char_ids"),
    "encoder_padding_mask": ("encoder_token_ids", "encoder_padding_mask"),
    "decoder_padding_mask": ("decoder_token_ids", "decoder_padding_mask"),
}


def check_padding(padding, multiple):
    """Validates a padding mode and its multiple (ValueError naming them)."""
    if padding not in PADDING_MODES:
        raise ValueError(f"padding={padding!r}: expected one of {PADDING_MODES}.")
    if int(multiple) < 1:
        raise ValueError(f"pad_to_multiple_of={multiple!r}: expected an integer >= 1.")


def shape_bound(sequence_length, multiple=DEFAULT_MULTIPLE):
    """How many distinct lengths `trim_batch` can give at T."""
    return len({padded_width(n, sequence_length, multiple)
                for n in range(1, int(sequence_length) + 1)})


def padded_width(longest, sequence_length, multiple=DEFAULT_MULTIPLE):
    """The length a batch whose longest row has `longest` real tokens is
    cut to (Python ints: `trim_batch`'s rule for NumPy batches; the module
    says the rule, `padded_length` is its TensorFlow twin)."""
    longest, multiple = max(int(longest), 1), int(multiple)
    # The step doubles once per doubling of L beyond STEPS_PER_OCTAVE steps.
    step = multiple << ((longest - 1) // (STEPS_PER_OCTAVE * multiple)).bit_length()
    return min(int(sequence_length), -(-longest // step) * step)


def _label_group(x):
    """The group whose length per-token labels share: the decoder's
    (text2text targets) when there is one, else the encoder's."""
    return "decoder_padding_mask" if "decoder_padding_mask" in x else "input_mask"


def _cut(tensor, axis, length):
    import tensorflow as tf

    size = [-1] * tensor.shape.rank
    size[axis] = length
    return tf.slice(tensor, [0] * tensor.shape.rank, size)


def padded_length(mask, multiple=DEFAULT_MULTIPLE):
    """int32 scalar: the longest row's real tokens (over every axis but the
    last) rounded up as `padded_width` rounds, at least `multiple` and at
    most T."""
    import tensorflow as tf

    full = tf.shape(mask)[-1]
    longest = tf.reduce_max(tf.reduce_sum(tf.cast(mask != 0, tf.int32), axis=-1))
    longest = tf.maximum(longest, 1)  # a batch of empty rows still keeps [CLS]
    # bit_length(q) as a count of the powers of two q reaches (no clz op).
    octaves = (longest - 1) // (STEPS_PER_OCTAVE * int(multiple))
    doublings = tf.reduce_sum(tf.cast(octaves >= tf.bitwise.left_shift(1, tf.range(31)),
                                      tf.int32))
    step = tf.bitwise.left_shift(tf.constant(int(multiple), tf.int32), doublings)
    rounded = (longest + step - 1) // step * step
    return tf.minimum(rounded, full)


def trim_batch(x, y=None, sample_weight=None, multiple=DEFAULT_MULTIPLE):
    """A batch of packed features cut to its longest row (see the module).

    Args:
        x: dict of feature tensors with a leading batch axis, one or more
            masks of `LENGTH_GROUPS` among them ([B, T] or [B, C, T]).
        y, sample_weight: a tensor or dict of tensors, or None; each one
            with the label group's token axis at its full static T
            (tagging tags [B, T], text2text targets [B, T']) is cut with
            it, the others (class ids, QA positions) are left alone.
        multiple: the rounding (`DEFAULT_MULTIPLE`).

    Returns:
        (x, y, sample_weight) in the same structure.
    """
    import tensorflow as tf

    if not isinstance(x, dict):
        return x, y, sample_weight
    x = dict(x)
    lengths = {}
    for mask_key, keys in LENGTH_GROUPS.items():
        if mask_key not in x:
            continue
        mask = x[mask_key]
        axis = mask.shape.rank - 1
        length = padded_length(mask, multiple)
        lengths[mask_key] = (axis, mask.shape[axis], length)
        for key in keys:
            if key in x:
                x[key] = _cut(x[key], axis, length)
    group = lengths.get(_label_group(x))

    def cut_label(tensor):
        if group is None or tensor is None or not hasattr(tensor, "shape"):
            return tensor
        axis, full, length = group
        if full is None or tensor.shape.rank is None or tensor.shape.rank <= axis \
                or tensor.shape[axis] != full:
            return tensor
        return _cut(tensor, axis, length)

    return x, tf.nest.map_structure(cut_label, y), tf.nest.map_structure(cut_label, sample_weight)


def trim_element(multiple=DEFAULT_MULTIPLE):
    """A `Dataset.map` function: an element `x`, `(x, y)` or `(x, y, w)`
    of batched features -> the same, cut by `trim_batch`."""
    import tensorflow as tf


    @tf.autograph.experimental.do_not_convert
    def trim(*element):
        if len(element) == 1:
            return trim_batch(element[0], multiple=multiple)[0]
        x, y, weight = trim_batch(*element, multiple=multiple)
        return (x, y) if len(element) == 2 else (x, y, weight)

    return trim


def mask_length(element):
    """The real tokens of one packed example, int64 scalar, the key
    `bucket_batches` sorts by: for each mask of `LENGTH_GROUPS` in it, its
    longest row (a multiple-choice example's longest choice, which sets its
    batch's width), summed over the masks (a text2text pair's encoder and
    decoder)."""
    import tensorflow as tf

    x = element[0] if isinstance(element, tuple) else element
    total = tf.constant(0, tf.int64)
    for mask_key in LENGTH_GROUPS:
        if mask_key in x:
            real = tf.reduce_sum(tf.cast(x[mask_key] != 0, tf.int64), axis=-1)
            total += tf.reduce_max(real)
    return total


def bucket_batches(dataset, batch_size, seed=None, pool_batches=50, length=mask_length,
                   drop_remainder=False, prepare=None):
    """Unbatched, shuffled examples -> batches of similar length (see the
    module): pools of `pool_batches * batch_size` examples, each sorted by
    `length(element)`, batched, and the batches shuffled within the pool.

    The shuffle before (by the caller) decides the pools; this one is
    seeded by `seed` and reshuffles every epoch.

    Args:
        dataset: unbatched examples: packed features, or raw examples with
            `prepare`.
        batch_size, seed, pool_batches, drop_remainder: as above.
        length: example -> int64 scalar sort key (`mask_length`).
        prepare: optional map from a batch of raw examples to a batch of
            packed features (a preprocessor's tokenizer). Each pool is then
            tokenized first and sorted by its real pieces: the bytes of a
            text follow its pieces too loosely to sort by (on the built-in
            task's 2,000 sentences a batch of 32 sorted by bytes was 37.6
            tokens wide on average, by pieces 28.0, with 20.4 real).
    """
    import tensorflow as tf

    pool = int(batch_size) * int(pool_batches)
    count = int(dataset.cardinality())
    if prepare is not None:
        dataset = dataset.batch(pool).map(prepare, num_parallel_calls=tf.data.AUTOTUNE).unbatch()
    # Tuples of (element, length) so the sort sees one key per example.
    keyed = dataset.map(lambda *e: (e if len(e) > 1 else e[0], length(e)),
                        num_parallel_calls=tf.data.AUTOTUNE)

    @tf.autograph.experimental.do_not_convert
    def sorted_pool(elements, lengths):
        order = tf.argsort(lengths, stable=True)
        return tf.nest.map_structure(lambda t: tf.gather(t, order), elements)

    batches = keyed.batch(pool).map(sorted_pool).unbatch().batch(
        int(batch_size), drop_remainder=drop_remainder)
    batches = batches.shuffle(int(pool_batches), seed=seed, reshuffle_each_iteration=True)
    if count >= 0:  # pools hold whole batches: as many batches as without pools
        size = count // int(batch_size) if drop_remainder else -(-count // int(batch_size))
        batches = batches.apply(tf.data.experimental.assert_cardinality(size))
    return batches
