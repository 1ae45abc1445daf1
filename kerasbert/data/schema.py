"""The pretraining TFRecord schema, defined once.

Feature names and meanings are the original google-research/bert ones, so
files written by its `create_pretraining_data.py` (or Model Garden's) and by
ours are interchangeable. The file -> model name mapping lives here too.

    input_ids            int64 [sequence_length]   token ids, 0-padded
    input_mask           int64 [sequence_length]   1 = real token
    segment_ids          int64 [sequence_length]   0 = segment A, 1 = B
    masked_lm_positions  int64 [max_predictions]  0-padded
    masked_lm_ids        int64 [max_predictions]  original ids, 0-padded
    masked_lm_weights    float [max_predictions]  1.0 real, 0.0 padding
    next_sentence_labels int64 [1]   1 = B is RANDOM (NSP) / order SWAPPED
                                     (SOP); 0 = B really follows A

Files written with `--no-masking` hold no masked_lm_* features (masks are
drawn in tf.data); files written with `--objective none` hold no
next_sentence_labels.
"""

SCHEMA_VERSION = 1

OBJECTIVES = ("nsp", "sop", "none")

# name -> (dtype, length key); the length key names the metadata field that
# gives the feature's fixed length (or a literal int).
FEATURES = {
    "input_ids": ("int64", "max_seq_length"),
    "input_mask": ("int64", "max_seq_length"),
    "segment_ids": ("int64", "max_seq_length"),
    "masked_lm_positions": ("int64", "max_predictions_per_seq"),
    "masked_lm_ids": ("int64", "max_predictions_per_seq"),
    "masked_lm_weights": ("float32", "max_predictions_per_seq"),
    "next_sentence_labels": ("int64", 1),
}

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids")
MASKED_LM_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")
SENTENCE_LABEL_FEATURE = "next_sentence_labels"

# File feature name -> model input name (TF Hub convention for the encoder
# inputs; the rest keep their names).
FILE_TO_MODEL = {
    "input_ids": "input_word_ids",
    "input_mask": "input_mask",
    "segment_ids": "input_type_ids",
    "masked_lm_positions": "masked_lm_positions",
    "masked_lm_ids": "masked_lm_ids",
    "masked_lm_weights": "masked_lm_weights",
    "next_sentence_labels": "next_sentence_labels",
}


def feature_names(objective="nsp", masked=True):
    """The features a file holds for an objective and masking mode."""
    if objective not in OBJECTIVES:
        raise ValueError(
            f"Unknown objective {objective!r}; expected one of {OBJECTIVES}."
        )
    names = list(SEQUENCE_FEATURES)
    if masked:
        names += MASKED_LM_FEATURES
    if objective != "none":
        names.append(SENTENCE_LABEL_FEATURE)
    return names


def feature_lengths(names, sequence_length, max_predictions_per_seq):
    """name -> fixed length, for the given sizes."""
    sizes = {
        "max_seq_length": sequence_length,
        "max_predictions_per_seq": max_predictions_per_seq,
    }
    lengths = {}
    for name in names:
        if name not in FEATURES:
            raise ValueError(f"Unknown pretraining feature {name!r}.")
        key = FEATURES[name][1]
        lengths[name] = key if isinstance(key, int) else sizes[key]
    return lengths


def describe_features(names, sequence_length, max_predictions_per_seq):
    """JSON-ready {name: {"dtype", "shape"}} (stored in metadata.json)."""
    lengths = feature_lengths(names, sequence_length, max_predictions_per_seq)
    return {
        name: {"dtype": FEATURES[name][0], "shape": [lengths[name]]}
        for name in names
    }


def parsing_spec(names, sequence_length, max_predictions_per_seq):
    """{name: tf.io.FixedLenFeature} for `tf.io.parse_example`."""
    import tensorflow as tf

    lengths = feature_lengths(names, sequence_length, max_predictions_per_seq)
    return {
        name: tf.io.FixedLenFeature([lengths[name]], tf.as_dtype(FEATURES[name][0]))
        for name in names
    }
