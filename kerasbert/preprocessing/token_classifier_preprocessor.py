"""Raw words with a tag per word -> `TokenClassifier` features, in TensorFlow.

The same layout as the CLI's converter (`kerasbert.data.finetuning.tagging`)
builds in Python, here as ragged-tensor ops that run in `tf.data`: each word
tokenized on its own (byte-level BPE: with a space before every word but an
example's first, so the pieces are those of the space-joined sentence), the
word's tag on its first piece with sample weight 1, the other pieces,
[CLS], [SEP] and padding weighted 0; pieces past T - 2 are cut, and a word
whose first piece is cut has no prediction.
"""

import keras
import numpy as np
import tensorflow as tf

from kerasbert.errors import UsageError
from kerasbert.preprocessing.task_preprocessor import TaskPreprocessor
from kerasbert.preprocessing.task_preprocessor import clean_text
from kerasbert.text import tokenizer_kind
from kerasbert.text.families import BPE


def _words(x, what="words"):
    """A list of word lists -> a ragged string tensor [N, (W)]."""
    if isinstance(x, (tf.Tensor, tf.RaggedTensor)):
        return x
    rows = []
    for i, row in enumerate(x):
        if isinstance(row, (str, bytes)):
            raise UsageError(f"{what} {i}: a tagging example is a list of words, got a string "
                             "(split it into words first).")
        rows.append([w.encode("utf-8") if isinstance(w, str) else w for w in row])
    return tf.ragged.constant(rows, dtype=tf.string, ragged_rank=1) if rows else \
        tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.string), tf.zeros([0], tf.int64))


@keras.saving.register_keras_serializable(package="kerasbert")
class TokenClassifierPreprocessor(TaskPreprocessor):
    """`[CLS] pieces of every word [SEP]`, padded to T, with labels and
    sample weights on each word's first piece.

    Inputs: a list of examples, each a list of words (or a `tf.data`
    dataset of 1-D string tensors). Labels: one tag (name or id) per word.
    `predict` on raw input returns, per example, float32 [W, num_labels]
    tag probabilities of its words (NaN rows for words with no piece in the
    window: cut by T, or made only of characters the tokenizer drops).

    Example:

    >>> import pathlib, tempfile
    >>> from kerasbert.text import SPECIAL_TOKENS, WordPieceTokenizer
    >>> vocab = pathlib.Path(tempfile.mkdtemp()) / "vocab.txt"
    >>> _ = vocab.write_text("\\n".join([*SPECIAL_TOKENS, "the", "movie", "was", "good"]))
    >>> from kerasbert.preprocessing import TokenClassifierPreprocessor
    >>> tagger = TokenClassifierPreprocessor(WordPieceTokenizer(vocab), sequence_length=8,
    ...                                      label_names=["O", "B-FILM"])
    >>> x, y, weights = next(iter(tagger.dataset([["the", "movie"]], [["O", "B-FILM"]],
    ...                                          batch_size=1)))
    >>> x["input_word_ids"].numpy().tolist()                 # [B, T]
    [[2, 5, 6, 3, 0, 0, 0, 0]]
    >>> y.numpy().tolist(), weights.numpy().tolist()         # on each word's first piece
    ([[0, 0, 1, 0, 0, 0, 0, 0]], [[0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    """

    task_types = ("tagging",)
    example_rank = 1

    def _is_batched(self, spec):
        first = spec[0] if isinstance(spec, tuple) else spec
        return first.shape.rank == 2

    def inputs_of(self, data):
        labels = [e.get("labels") for e in data.examples]
        return ([e["tokens"] for e in data.examples],
                None if any(label is None for label in labels) else labels)

    def slices(self, x, y=None, sample_weight=None, num_labels=None):
        words = _words(x)
        if y is not None:
            counts = [len(row) for row in y]
            expected = words.row_lengths().numpy().tolist()
            if len(counts) != len(expected):
                raise UsageError(f"{len(counts)} label lists for {len(expected)} examples.")
            bad = next((i for i, (a, b) in enumerate(zip(counts, expected)) if a != b), None)
            if bad is not None:
                raise UsageError(f"example {bad}: {expected[bad]} words but {counts[bad]} labels.")
            flat = self.label_ids([t for row in y for t in row], num_labels, "tag")
            y = tf.RaggedTensor.from_row_lengths(flat, tf.constant(counts, tf.int64))
        return words, y, sample_weight

    def layout(self, words):
        """Where every word's pieces go.

        Args:
            words: ragged string [B, (W)].

        Returns:
            (pieces int32 [B, (P)] the kept pieces of each example (at most
            T - 2), piece_word int64 [B, (P)] the global word index of each
            piece (row-major over the batch), first bool [B, (P)] whether the
            piece starts its word, word_position int32 [B, (W)] the position
            of each word's first piece in the packed row (after [CLS]), -1
            where it has none).
        """
        flat = words.flat_values
        if tokenizer_kind(self.tokenizer) == BPE:
            index = tf.ragged.range(words.row_lengths()).flat_values
            blank = tf.equal(tf.strings.strip(flat), "")
            flat = tf.where((index > 0) & ~blank, tf.strings.join([" ", flat]), flat)
        word_pieces = self.tokenizer.tokenize_ids(clean_text(flat))  # [N words, (pieces)]
        lengths = word_pieces.row_lengths()
        num_words = tf.shape(lengths, out_type=tf.int64)[0]
        piece_word = tf.repeat(tf.range(num_words), lengths)
        first = tf.equal(tf.ragged.range(lengths).flat_values, 0)
        example_lengths = tf.math.unsorted_segment_sum(lengths, words.value_rowids(),
                                                       words.nrows())
        splits = tf.concat([[0], tf.cumsum(example_lengths)], axis=0)

        def per_example(values):
            return tf.RaggedTensor.from_row_splits(values, splits, validate=False)

        budget = self.sequence_length - 2
        keep = tf.ragged.range(example_lengths) < budget
        pieces = tf.ragged.boolean_mask(per_example(tf.cast(word_pieces.flat_values, tf.int32)),
                                        keep)
        piece_word = tf.ragged.boolean_mask(per_example(piece_word), keep)
        first = tf.ragged.boolean_mask(per_example(first), keep)
        # Each word's first kept piece: its position after [CLS].
        position = tf.cast(tf.ragged.range(pieces.row_lengths()).flat_values, tf.int32) + 1
        starts = tf.boolean_mask(piece_word.flat_values, first.flat_values)
        word_position = tf.tensor_scatter_nd_update(
            tf.fill([num_words], -1), starts[:, tf.newaxis],
            tf.boolean_mask(position, first.flat_values))
        return pieces, piece_word, first, words.with_flat_values(word_position)

    def preprocess(self, x, y=None, sample_weight=None):
        if sample_weight is not None:
            raise UsageError("Tagging weights come from the words' first pieces; give no "
                             "sample_weight.")
        words = x if isinstance(x, tf.RaggedTensor) else tf.RaggedTensor.from_tensor(x)
        pieces, piece_word, first, _ = self.layout(words)
        tokenizer, t = self.tokenizer, self.sequence_length
        rows = pieces.nrows()

        def framed(values, start, end, fill, dtype):
            column = tf.fill([rows, 1], tf.constant(start, dtype))
            closing = tf.fill([rows, 1], tf.constant(end, dtype))
            return tf.concat([column, values, closing], axis=1).to_tensor(
                default_value=tf.constant(fill, dtype), shape=[None, t])

        ids = framed(pieces, tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id, tf.int32)
        mask = framed(tf.ones_like(pieces), 1, 1, 0, tf.int32)
        features = {"input_word_ids": ids, "input_mask": mask,
                    "input_type_ids": tf.zeros_like(ids)}
        if y is None:
            return features
        y = y if isinstance(y, tf.RaggedTensor) else tf.RaggedTensor.from_tensor(y)
        tags = self.graph_label_ids(y.flat_values)
        piece_tags = tf.where(first.flat_values, tf.gather(tags, piece_word.flat_values), 0)
        labels = framed(pieces.with_flat_values(piece_tags), 0, 0, 0, tf.int32)
        weights = framed(pieces.with_flat_values(tf.cast(first.flat_values, tf.float32)),
                         0.0, 0.0, 0.0, tf.float32)
        return features, labels, weights

    def predict_dataset(self, x, batch_size=32, fixed_shapes=False):
        words = _words(x)
        positions = [self.layout(words[i:i + 1024])[3] for i in range(0, int(words.nrows()), 1024)]
        positions = tf.concat(positions, axis=0) if positions else words.with_flat_values(
            tf.zeros([0], tf.int32))
        return self.dataset(words, batch_size=batch_size, fixed_shapes=fixed_shapes), positions

    def postprocess(self, outputs, positions):
        outputs = np.asarray(outputs, np.float32)
        exp = np.exp(outputs - outputs.max(axis=-1, keepdims=True))
        probabilities = exp / exp.sum(axis=-1, keepdims=True)  # [N, T, L]
        result = []
        for row, where in enumerate(positions.to_list()):
            where = np.asarray(where, np.int64)
            words = np.full((len(where), probabilities.shape[-1]), np.nan, np.float32)
            kept = where >= 0
            words[kept] = probabilities[row, where[kept]]
            result.append(words)
        return result
