"""The fine-tuning TFRecord schema, defined once.

Sequence features keep the original google-research/bert names (as the
pretraining schema, kerasbert/data/schema.py); labels follow run_classifier.py
/ run_squad.py where they have a name there. Shapes: T = sequence_length,
C = num_choices (multiple choice stores [C, T] per record).

    every task      input_ids, input_mask, segment_ids     int64 [T] ([C, T])
    classification  label_ids                               int64 [1]
    regression      label_values                            float [1]
    tagging         label_ids int64 [T], label_weights float [T], word_ids int64 [T]
    qa              start_positions, end_positions          int64 [1]
                    example_index                           int64 [1]
                    token_start_char, token_end_char, token_is_max_context int64 [T]
    multiple_choice label_ids                               int64 [1]
    text2text       encoder_token_ids, encoder_padding_mask, decoder_token_ids,
                    decoder_padding_mask (instead of the three inputs),
                    label_ids                               int64 [T]
                    (the target is as long as the source: T each)

Labels are absent from files written from unlabelled examples.
"""

from kerasbert.data.finetuning.task_formats import task_format

SCHEMA_VERSION = 1

# file feature -> (where in TaskFeatures, name there, dtype, shape key).
# shape keys: "seq" [T] (or [C, T] for multiple choice), "one" [1].
_INPUTS = {
    "input_ids": ("x", "input_word_ids", "int64", "seq"),
    "input_mask": ("x", "input_mask", "int64", "seq"),
    "segment_ids": ("x", "input_type_ids", "int64", "seq"),
}
# The model inputs of an example kind whose model is not an encoder (by
# example kind; every other kind has `_INPUTS`).
_MODEL_INPUTS = {
    "text2text": {
        name: ("x", name, "int64", "seq") for name in (
            "encoder_token_ids", "encoder_padding_mask", "decoder_token_ids",
            "decoder_padding_mask")
    },
}
# Features holding token ids (checked against the vocabulary when read).
TOKEN_IDS = ("input_ids", "encoder_token_ids", "decoder_token_ids")
# By label kind (task_formats.py).
_LABELS = {
    "class": {"label_ids": ("y", None, "int64", "one")},
    "choice": {"label_ids": ("y", None, "int64", "one")},
    "number": {"label_values": ("y", None, "float32", "one")},
    "tag": {
        "label_ids": ("y", None, "int64", "seq"),
        "label_weights": ("sample_weight", None, "float32", "seq"),
    },
    "span": {
        "start_positions": ("y", "start_positions", "int64", "one"),
        "end_positions": ("y", "end_positions", "int64", "one"),
    },
    "target": {"label_ids": ("y", None, "int64", "seq")},
}
# By example kind.
_EXTRAS = {
    "words": {"word_ids": ("extras", "word_ids", "int64", "seq")},
    "squad": {
        "example_index": ("extras", "example_index", "int64", "one"),
        "token_start_char": ("extras", "token_start_char", "int64", "seq"),
        "token_end_char": ("extras", "token_end_char", "int64", "seq"),
        "token_is_max_context": ("extras", "token_is_max_context", "int64", "seq"),
    },
}


def features_for(task_type, labelled=True):
    """{file feature: (slot, key, dtype, shape key)} for a task type."""
    fmt = task_format(task_type)
    spec = dict(_MODEL_INPUTS.get(fmt.example, _INPUTS))
    if labelled:
        spec.update(_LABELS[fmt.label])
    spec.update(_EXTRAS.get(fmt.example, {}))
    return spec


def shape_of(shape_key, task_type, sequence_length, num_choices=None):
    if shape_key == "one":
        return [1]
    if shape_key == "seq" and task_format(task_type).per_choice:
        return [int(num_choices), int(sequence_length)]
    return [int(sequence_length)]


def describe(task_type, labelled, sequence_length, num_choices=None):
    """JSON-ready {name: {"dtype", "shape"}} (stored in metadata.json)."""
    return {
        name: {"dtype": dtype, "shape": shape_of(key, task_type, sequence_length, num_choices)}
        for name, (_, _, dtype, key) in features_for(task_type, labelled).items()
    }


def parsing_spec(task_type, labelled, sequence_length, num_choices=None):
    """{name: tf.io.FixedLenFeature} for `tf.io.parse_example`."""
    import tensorflow as tf

    return {
        name: tf.io.FixedLenFeature(shape_of(key, task_type, sequence_length, num_choices), tf.as_dtype(dtype))
        for name, (_, _, dtype, key) in features_for(task_type, labelled).items()
    }
