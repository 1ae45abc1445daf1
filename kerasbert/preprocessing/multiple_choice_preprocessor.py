"""Raw choices (with or without a context) -> `MultipleChoice` features."""

import keras
import numpy as np
import tensorflow as tf

from kerasbert.errors import UsageError
from kerasbert.preprocessing.task_preprocessor import TaskPreprocessor
from kerasbert.preprocessing.task_preprocessor import clean_text


def _text_list(values, what):
    if not all(isinstance(v, (str, bytes)) for v in values):
        raise UsageError(f"{what}: expected strings.")
    return [v.encode("utf-8") if isinstance(v, str) else v for v in values]


@keras.saving.register_keras_serializable(package="kerasbert")
class MultipleChoicePreprocessor(TaskPreprocessor):
    """Per choice `[CLS] context [SEP] choice [SEP]` (RoBERTa: `<s> context
    </s></s> choice </s>`), features int32 [B, C, T], as the SWAG converter
    and the exported model pack them (put a question stem in front of each
    choice).

    Inputs: a list of choice lists (every example the same number C of
    choices; the context is then empty), or `(contexts, choice_lists)`.
    Labels: the index of the right choice. `predict` on raw input returns
    probabilities float32 [B, C].

    Args:
        num_choices: C (the model's); checked against the data.

    Example:

    >>> from kerasbert.preprocessing import MultipleChoicePreprocessor
    >>> from kerasbert.text import ByteTokenizer
    >>> chooser = MultipleChoicePreprocessor(ByteTokenizer(), sequence_length=16, num_choices=3)
    >>> contexts, choices = ["Paris is in"], [["France", "Peru", "Mars"]]
    >>> x, y = next(iter(chooser.dataset((contexts, choices), [0], batch_size=1)))
    >>> {name: tuple(value.shape) for name, value in sorted(x.items())}   # [B, C, T]
    {'input_mask': (1, 3, 16), 'input_type_ids': (1, 3, 16), 'input_word_ids': (1, 3, 16)}
    >>> y.numpy().tolist()                                   # the right choice [B]
    [0]
    """

    task_types = ("multiple_choice",)
    example_rank = 1

    def __init__(self, tokenizer=None, sequence_length=None, label_names=None, task_type=None,
                 num_choices=None, **kwargs):
        super().__init__(tokenizer, sequence_length, None, task_type, **kwargs)
        self.num_choices = None if num_choices is None else int(num_choices)

    def _tuple_is_x(self):
        return True

    def _is_batched(self, spec):
        choices = spec[0][1] if isinstance(spec[0], tuple) else spec[1]
        return choices.shape.rank == 2

    def inputs_of(self, data):
        """A question stem goes in front of each choice, as the SWAG
        converter puts it."""
        contexts, choices = [], []
        for e in data.examples:
            question = (e.get("question") or "").strip()
            contexts.append(e["context"])
            choices.append([f"{question} {c}" if question else c for c in e["choices"]])
        labels = [e.get("label") for e in data.examples]
        return (contexts, choices), None if any(label is None for label in labels) else labels

    def slices(self, x, y=None, sample_weight=None, num_labels=None):
        if isinstance(x, tuple) and len(x) == 2 and len(x[0]) and isinstance(x[0][0], (str, bytes)):
            contexts, choices = x
        else:
            choices, contexts = x, [""] * len(x)
        choices = [list(c) for c in choices]
        if len(contexts) != len(choices):
            raise UsageError(f"{len(contexts)} contexts for {len(choices)} choice lists.")
        counts = {len(c) for c in choices}
        expected = self.num_choices or (counts.pop() if len(counts) == 1 else None)
        bad = next((i for i, c in enumerate(choices) if len(c) != expected), None)
        if bad is not None or expected is None:
            bad = bad or 0
            raise UsageError(f"example {bad}: {len(choices[bad])} choices, the model takes "
                             f"{expected or 'the same number for every example'}.")
        contexts = tf.constant(_text_list(contexts, "contexts"), tf.string)
        flat = [c for row in choices for c in row]
        choices = tf.reshape(tf.constant(_text_list(flat, "choices"), tf.string), [-1, expected])
        if y is not None:
            y = np.asarray(y)
            if len(y) != len(flat) // expected or y.dtype.kind not in "iu" or (
                    (y < 0) | (y >= expected)).any():
                raise UsageError(f"Labels of multiple choice are choice indices 0..{expected - 1}, "
                                 "one per example.")
            y = y.astype(np.int32)
        return (contexts, choices), y, sample_weight

    def preprocess(self, x, y=None, sample_weight=None):
        contexts, choices = x
        count = tf.shape(choices)[1]
        repeated = tf.reshape(tf.repeat(contexts[:, tf.newaxis], count, axis=1), [-1])
        tokenizer = self.tokenizer
        flat = self.packer(tokenizer.tokenize_ids(clean_text(repeated)),
                           tokenizer.tokenize_ids(clean_text(tf.reshape(choices, [-1]))))
        features = {name: tf.reshape(value, [-1, count, self.sequence_length])
                    for name, value in flat.items()}
        if y is not None:
            y = tf.cast(y, tf.int32)
        return keras.utils.pack_x_y_sample_weight(features, y, sample_weight)

    def postprocess(self, outputs, x):
        outputs = np.asarray(outputs, np.float32)
        exp = np.exp(outputs - outputs.max(axis=-1, keepdims=True))
        return exp / exp.sum(axis=-1, keepdims=True)

    def get_config(self):
        return {**super().get_config(), "num_choices": self.num_choices}
