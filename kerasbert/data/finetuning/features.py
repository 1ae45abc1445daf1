"""`TaskFeatures`: converted model features, and helpers shared by converters.

Feature names per task type (all NumPy; N features, T = sequence_length,
C = choices):

    every task, x:        input_word_ids, input_mask, input_type_ids  int32 [N, T]
                          (multiple choice: [N, C, T])
    classification/pair:  y int32 [N] (class id)
    regression:           y float32 [N]
    tagging:              y int32 [N, T] (tag id on each word's FIRST piece, 0
                          elsewhere); sample_weight float32 [N, T] (1 on first
                          pieces, 0 on other pieces, [CLS], [SEP], padding);
                          extras["word_ids"] int32 [N, T] (the word each piece
                          belongs to, -1 for [CLS]/[SEP]/padding)
    qa:                   y {"start_positions", "end_positions"} int32 [N]
                          (0 = [CLS]: answer not in this window, or
                          impossible); extras: example_index int32 [N],
                          token_start_char / token_end_char int32 [N, T]
                          (code point span of each context piece in the
                          ORIGINAL context, end exclusive; -1 elsewhere),
                          token_is_max_context int32 [N, T]
    multiple_choice:      y int32 [N] (the right choice)
    text2text:            x is the encoder-decoder's instead: encoder_token_ids,
                          encoder_padding_mask [N, S], decoder_token_ids,
                          decoder_padding_mask [N, T]; y int32 [N, T] (the
                          target's pieces + [end], 0 = padding): text2text.py

y (and sample_weight) are None when the examples have no labels.
"""

import dataclasses

import numpy as np

from kerasbert.data.finetuning.examples import TaskDataError

MODEL_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


@dataclasses.dataclass
class TaskFeatures:
    """Converted features of one task split.

    Attributes:
        task_type: the task type.
        x: {input name: int32 array} (MODEL_INPUTS).
        y: labels array, a dict of arrays (qa), or None.
        sample_weight: float32 [N, T] for tagging, else None.
        extras: per-feature arrays for decoding predictions (see module).
        label_names: class / tag names, or None.
        sequence_length: T.
        stats: counts: num_examples, num_features, and per task e.g.
            truncated_words (tagging), skipped_examples (qa).

    Example:

    >>> import os, tempfile
    >>> from kerasbert.data.finetuning import TaskData, convert_examples, make_dataset
    >>> from kerasbert.text import WordPieceTokenizer, write_vocab
    >>> vocab = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> write_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...              "the", "movie", "was", "good", "bad"], vocab)
    >>> data = TaskData([{"text_a": "the movie", "text_b": "was good", "label": "yes"}],
    ...                 "pair", label_names=["no", "yes"])
    >>> features = convert_examples(data, WordPieceTokenizer(vocab), 8)
    >>> features.task_type, features.sequence_length, features.x["input_type_ids"].tolist()
    ('pair', 8, [[0, 0, 0, 0, 1, 1, 1, 0]])
    >>> x, y = next(iter(make_dataset(features, batch_size=1)))   # what model.fit takes
    >>> sorted(x), y.numpy().tolist()
    (['input_mask', 'input_type_ids', 'input_word_ids'], [1])
    """

    task_type: str
    x: dict
    y: object = None
    sample_weight: object = None
    extras: dict = dataclasses.field(default_factory=dict)
    label_names: list = None
    sequence_length: int = 0
    stats: dict = dataclasses.field(default_factory=dict)

    def __len__(self):
        return int(len(next(iter(self.x.values()))))

    @property
    def num_labels(self):
        """As `TaskData.num_labels`: classes (tags), 1 for regression, the
        choices of a multiple-choice row ([N, C, T]), None for qa."""
        if self.task_type == "regression":
            return 1
        first = next(iter(self.x.values()))
        if first.ndim == 3:
            return int(first.shape[1])
        return len(self.label_names) if self.label_names is not None else None

    def select(self, index):
        """A new TaskFeatures holding the rows `index` (array/slice)."""
        def take(value):
            if value is None:
                return None
            if isinstance(value, dict):
                return {k: v[index] for k, v in value.items()}
            return value[index]

        return dataclasses.replace(
            self, x=take(self.x), y=take(self.y), sample_weight=take(self.sample_weight),
            extras=take(self.extras) or {},
        )


def check_max_seq_length(sequence_length, backbone):
    """Raises a clear error when `sequence_length` exceeds the backbone's
    position table (`backbone.max_sequence_length`, or an int)."""
    limit = backbone if isinstance(backbone, int) else getattr(backbone, "max_sequence_length", None)
    if limit is None:
        config = backbone.get_config() if hasattr(backbone, "get_config") else {}
        limit = config.get("max_sequence_length")
    if limit is None:
        return sequence_length
    if int(sequence_length) > int(limit):
        raise TaskDataError(
            f"max_seq_length {sequence_length} is above the backbone's {limit} positions "
            f"(max_sequence_length); use --max-seq-length {limit} or less."
        )
    if int(sequence_length) < 2:
        raise TaskDataError(f"max_seq_length must be at least 2, got {sequence_length}.")
    return sequence_length


def check_length(sequence_length, minimum=3):
    if int(sequence_length) < minimum:
        raise TaskDataError(f"max_seq_length must be at least {minimum}, got {sequence_length}.")
    return int(sequence_length)


CHUNK = 2048


def tokenize_lists(tokenizer, texts, chunk=CHUNK):
    """Texts -> list of WordPiece id lists, batched through tensorflow-text."""
    out = []
    for begin in range(0, len(texts), chunk):
        ragged = tokenizer.tokenize_ids(list(texts[begin:begin + chunk]))
        values = ragged.flat_values.numpy()
        splits = ragged.row_splits.numpy()
        out.extend(values[splits[i]:splits[i + 1]].tolist() for i in range(len(splits) - 1))
    return out


def tokenize_with_offsets_lists(tokenizer, texts, chunk=CHUNK):
    """Texts -> list of (ids, start chars, end chars) NumPy triples."""
    out = []
    for begin in range(0, len(texts), chunk):
        ids, starts, ends = tokenizer.tokenize_with_offsets(list(texts[begin:begin + chunk]))
        splits = ids.row_splits.numpy()
        ids, starts, ends = (t.flat_values.numpy() for t in (ids, starts, ends))
        for i in range(len(splits) - 1):
            a, b = splits[i], splits[i + 1]
            out.append((ids[a:b], starts[a:b], ends[a:b]))
    return out


def pack_batches(packer, tokenizer, texts_a, texts_b=None, chunk=CHUNK):
    """Texts -> {input name: int32 [N, T]} through tokenizer + packer
    (`kerasbert.text.make_packer`)."""
    parts = {name: [] for name in MODEL_INPUTS}
    for begin in range(0, len(texts_a), chunk):
        a = tokenizer.tokenize_ids(list(texts_a[begin:begin + chunk]))
        b = None
        if texts_b is not None:
            b = tokenizer.tokenize_ids(list(texts_b[begin:begin + chunk]))
        packed = packer(a, b)
        for name in MODEL_INPUTS:
            parts[name].append(packed[name].numpy().astype(np.int32))
    if not parts["input_word_ids"]:
        t = packer.sequence_length
        return {name: np.zeros((0, t), np.int32) for name in MODEL_INPUTS}
    return {name: np.concatenate(v) for name, v in parts.items()}
