"""Raw text (one text or a pair) -> `TextClassifier` features."""

import keras
import numpy as np
import tensorflow as tf

from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.errors import UsageError
from kerasbert.preprocessing.task_preprocessor import TaskPreprocessor
from kerasbert.preprocessing.task_preprocessor import clean_text


def _strings(values, what):
    """A 1-D list/array of text -> a string tensor [N]; a clear error for
    anything else."""
    array = np.asarray(values, dtype=object)
    if array.ndim != 1:
        raise UsageError(f"{what}: expected a list of strings, got an array of shape "
                         f"{array.shape}.")
    bad = next((i for i, v in enumerate(array) if not isinstance(v, (str, bytes))), None)
    if bad is not None:
        raise UsageError(f"{what} {bad}: expected a string, got {type(array[bad]).__name__}.")
    return tf.constant([v.encode("utf-8") if isinstance(v, str) else v for v in array],
                       tf.string)


@keras.saving.register_keras_serializable(package="kerasbert")
class TextClassifierPreprocessor(TaskPreprocessor):
    """`[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]` (RoBERTa: `<s> a </s></s> b
    </s>`), padded to T, from raw strings; labels as class names or ids
    (regression: numbers).

    Inputs: `texts` (a list / array of str, or a `tf.data` dataset of
    strings) or a pair `(texts_a, texts_b)`. The first labelled data decide
    whether the model takes pairs (task type "pair") and, with string
    labels, the label vocabulary (sorted distinct names), unless the task
    was built with `label_names`.

    `predict` on raw text returns probabilities float32 [B, num_classes]
    (regression: the scores [B]).

    Example:

    >>> import os, tempfile
    >>> from kerasbert.preprocessing import TextClassifierPreprocessor
    >>> from kerasbert.text import SPECIAL_TOKENS, WordPieceTokenizer, write_vocab
    >>> vocab = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> write_vocab([*SPECIAL_TOKENS, "the", "movie", "was", "good", "bad"], vocab)   # ids 0-9
    >>> preprocessor = TextClassifierPreprocessor(WordPieceTokenizer(vocab), sequence_length=8,
    ...                                           label_names=["bad", "good"])
    >>> x, y = next(iter(preprocessor.dataset(["the movie was good", "bad"], ["good", "bad"],
    ...                                       batch_size=2)))
    >>> x["input_word_ids"].numpy().tolist()                 # [B, T] int32
    [[2, 5, 6, 7, 8, 3, 0, 0], [2, 9, 3, 0, 0, 0, 0, 0]]
    >>> y.numpy().tolist()                                   # label ids [B]
    [1, 0]
    """

    task_types = ("classification", "pair", "regression")

    def __init__(self, tokenizer=None, sequence_length=None, label_names=None, task_type=None,
                 **kwargs):
        super().__init__(tokenizer, sequence_length, label_names, task_type, **kwargs)
        # Single texts or pairs: given, or decided by the first data seen.
        self._arity_known = task_type is not None

    def _tuple_is_x(self):
        return self.format.text_pair

    def _decide(self, pair):
        if pair == self.format.text_pair:
            self._arity_known = True
            return
        if self._arity_known or self.format.float_labels:
            kind = "pairs (texts_a, texts_b)" if self.format.text_pair else "single texts"
            raise UsageError(f"This {self.task_type} model takes {kind}; got "
                             f"{'pairs' if pair else 'single texts'}.")
        self.task_type, self._arity_known = ("pair" if pair else "classification"), True

    def adapt(self, spec):
        first = spec[0] if isinstance(spec, tuple) and len(spec) in (2, 3) else spec
        if isinstance(first, tuple):
            self._decide(True)
        elif isinstance(spec, tuple) and len(spec) == 2 and self.format.text_pair:
            self._decide(True)
        else:
            self._decide(False)

    def _texts(self, x):
        """(texts_a, texts_b or None), checking the model's arity."""
        if isinstance(x, (str, bytes)):
            x = [x]
        pair = isinstance(x, tuple) and len(x) == 2 and not isinstance(x[0], (str, bytes))
        self._decide(pair)
        if pair:
            if len(x[0]) != len(x[1]):
                raise UsageError(f"A pair needs as many texts_b as texts_a: {len(x[0])} and "
                                 f"{len(x[1])}.")
            return _strings(x[0], "texts_a"), _strings(x[1], "texts_b")
        return _strings(x, "text"), None

    def inputs_of(self, data):
        a = [e["text_a"] for e in data.examples]
        x = (a, [e["text_b"] for e in data.examples]) if task_format(data.task_type).text_pair else a
        labels = [e.get("label") for e in data.examples]
        return x, None if all(label is None for label in labels) else labels

    def slices(self, x, y=None, sample_weight=None, num_labels=None):
        a, b = self._texts(x)
        texts = a if b is None else (a, b)
        if y is not None:
            if len(y) != int(a.shape[0]):
                raise UsageError(f"{len(y)} labels for {int(a.shape[0])} texts.")
            if self.format.float_labels:
                y = np.asarray(y, np.float32)
            else:
                y = self.label_ids(y, num_labels)
        return texts, y, None if sample_weight is None else np.asarray(sample_weight, np.float32)

    def preprocess(self, x, y=None, sample_weight=None):
        if isinstance(x, (tuple, list)):
            a, b = x
        else:
            a, b = x, None
        tokenizer = self.tokenizer
        a = tokenizer.tokenize_ids(clean_text(a))
        if b is not None:
            b = tokenizer.tokenize_ids(clean_text(b))
        features = self.packer(a, b)
        if y is not None:
            y = tf.cast(y, tf.float32) if self.format.float_labels else self.graph_label_ids(y)
        return keras.utils.pack_x_y_sample_weight(features, y, sample_weight)

    def postprocess(self, outputs, x):
        outputs = np.asarray(outputs, np.float32)
        if self.format.float_labels:
            return outputs[:, 0]
        shifted = outputs - outputs.max(axis=-1, keepdims=True)
        exp = np.exp(shifted)
        return exp / exp.sum(axis=-1, keepdims=True)
