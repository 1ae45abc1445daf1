"""Raw source/target strings -> encoder-decoder features (`Seq2SeqLM`), and
generated ids -> text.

The layout is `kerasbert.data.finetuning.text2text`'s (the features the
CLI converts for validation): source pieces + [end] padded to S; decoder
inputs [start] + target pieces and labels target pieces + [end], padded to
T; 0 is padding. The graph functions here (`encode_sources`,
`encode_targets`, `decode_generated`) are TensorFlow and tensorflow-text
ops only: `tf.data` runs them while a model trains, and the exported
SavedModel (`kerasbert.serving.text2text_serving`) runs the same ones, so
a served model sees the ids it was trained on.
"""

import keras
import numpy as np
import tensorflow as tf

from kerasbert.data.finetuning.text2text import PAD_ID
from kerasbert.data.finetuning.text2text import special_ids
from kerasbert.errors import UsageError
from kerasbert.preprocessing.lengths import check_target_length  # noqa: F401 (its old home)
from kerasbert.preprocessing.task_preprocessor import TaskPreprocessor
from kerasbert.preprocessing.task_preprocessor import clean_text
from kerasbert.preprocessing.text_classifier_preprocessor import _strings


def _pad(pieces, length, before=None, after=None):
    """Ragged ids [B, (n)] -> (ids int32 [B, length], mask int32 [B, length]):
    each row `before + pieces + after`, the pieces cut to fit."""
    pieces = tf.cast(pieces, tf.int32)
    room = length - (before is not None) - (after is not None)
    pieces = pieces[:, :room]
    rows = pieces.nrows()
    parts = [pieces]
    if before is not None:
        parts.insert(0, tf.RaggedTensor.from_tensor(tf.fill([rows, 1], before)))
    if after is not None:
        parts.append(tf.RaggedTensor.from_tensor(tf.fill([rows, 1], after)))
    ids = tf.concat(parts, axis=1) if len(parts) > 1 else pieces
    dense = ids.to_tensor(default_value=PAD_ID, shape=[None, length])
    mask = tf.sequence_mask(ids.row_lengths(), length, dtype=tf.int32)
    return dense, mask


def encode_sources(tokenizer, texts, length):
    """Source strings [B] -> {"encoder_token_ids", "encoder_padding_mask"}
    int32 [B, length]: pieces + [end]."""
    _, end = special_ids(tokenizer)
    ids, mask = _pad(tokenizer.tokenize_ids(clean_text(texts)), length, after=end)
    return {"encoder_token_ids": ids, "encoder_padding_mask": mask}


def encode_targets(tokenizer, texts, length):
    """Target strings [B] -> ({"decoder_token_ids", "decoder_padding_mask"},
    labels) int32 [B, length]: [start] + pieces, and pieces + [end]."""
    start, end = special_ids(tokenizer)
    pieces = tokenizer.tokenize_ids(clean_text(texts))
    ids, mask = _pad(pieces, length, before=start)
    labels, _ = _pad(pieces, length, after=end)
    return {"decoder_token_ids": ids, "decoder_padding_mask": mask}, labels


def start_only(batch, length, start):
    """Decoder inputs with nothing generated yet: [start] then padding."""
    ids = tf.pad(tf.fill([batch, 1], tf.constant(start, tf.int32)), [[0, 0], [0, length - 1]])
    return {"decoder_token_ids": ids, "decoder_padding_mask": tf.cast(ids != PAD_ID, tf.int32)}


def generated_pieces(tokenizer, ids):
    """`Seq2SeqLM.generate`'s ids int [B, L] (the tokens after [start], the
    first [end] included, 0 after it) -> the target's pieces, ragged int32
    [B, (n)]: everything before the first [end], padding and [start]
    left out."""
    start, end = special_ids(tokenizer)
    ids = tf.cast(ids, tf.int32)
    ended = tf.cumsum(tf.cast(tf.equal(ids, end), tf.int32), axis=1) > 0
    keep = tf.logical_not(ended) & tf.not_equal(ids, PAD_ID) & tf.not_equal(ids, start)
    return tf.ragged.boolean_mask(ids, keep)


def decode_generated(tokenizer, ids):
    """Generated ids [B, L] -> (target strings [B], pieces per row int32
    [B]) through the tokenizer's `detokenize` (tensorflow-text ops)."""
    pieces = generated_pieces(tokenizer, ids)
    lengths = tf.cast(pieces.row_lengths(), tf.int32)
    # detokenize drops a dense input's padding; ragged rows may be empty.
    return tokenizer.detokenize(pieces), lengths


@keras.saving.register_keras_serializable(package="kerasbert")
class Text2TextPreprocessor(TaskPreprocessor):
    """Source (and target) strings -> `Seq2SeqLM` features; ids -> text.

    Inputs: `sources` (a list / array of str, or a `tf.data` dataset of
    strings or of (source, target) pairs); labels: the target strings.
    Batches are ({"encoder_token_ids", "encoder_padding_mask",
    "decoder_token_ids", "decoder_padding_mask"}, labels int32 [B, T]);
    without targets the decoder inputs are [start] alone.

    `generate(model, sources)` writes the targets (beam search by default)
    and returns strings: the same encoding and decoding as the exported
    SavedModel's graph.

    Args:
        tokenizer, label_names, task_type: as `TaskPreprocessor`
            (label_names are None: targets are text).
        sequence_length: S, the source's packed length (with [end]);
            default the task type's, 64.
        target_length: T, the target's (with [start] / [end]), and the
            longest generation; default S.

    Example:

    >>> from kerasbert.preprocessing import Text2TextPreprocessor
    >>> from kerasbert.text import ByteTokenizer
    >>> translator = Text2TextPreprocessor(ByteTokenizer(), sequence_length=8, target_length=4)
    >>> x, labels = next(iter(translator.dataset(["ab"], ["cd"], batch_size=1)))
    >>> x["encoder_token_ids"].numpy().tolist()              # source bytes + 2, then </s>
    [[99, 100, 1, 0, 0, 0, 0, 0]]
    >>> x["decoder_token_ids"].numpy().tolist(), labels.numpy().tolist()   # shifted by one
    ([[1, 101, 102, 0]], [[101, 102, 1, 0]])
    """

    task_types = ("text2text",)
    options = ("target_length",)

    def __init__(self, tokenizer=None, sequence_length=None, label_names=None, task_type=None,
                 target_length=None, **kwargs):
        super().__init__(tokenizer, sequence_length, None, task_type, **kwargs)
        self.target_length = int(target_length or self.sequence_length)
        if self.sequence_length < 2 or self.target_length < 2:
            raise ValueError(f"sequence_length and target_length must be at least 2 (a piece and "
                             f"[end]), got {self.sequence_length} and {self.target_length}.")

    @property
    def start_id(self):
        return special_ids(self.tokenizer)[0]

    @property
    def end_id(self):
        return special_ids(self.tokenizer)[1]

    def inputs_of(self, data):
        sources = [e["source"] for e in data.examples]
        targets = [e.get("target") for e in data.examples]
        return sources, None if any(t is None for t in targets) else targets

    def slices(self, x, y=None, sample_weight=None, num_labels=None):
        if isinstance(x, (str, bytes)):
            x = [x]
        sources = _strings(x, "source")
        if y is not None:
            if isinstance(y, (str, bytes)):
                y = [y]
            if len(y) != int(sources.shape[0]):
                raise UsageError(f"{len(y)} targets for {int(sources.shape[0])} sources.")
            y = _strings(y, "target")
        return sources, y, None if sample_weight is None else np.asarray(sample_weight, np.float32)

    def preprocess(self, x, y=None, sample_weight=None):
        features = encode_sources(self.tokenizer, x, self.sequence_length)
        if y is None:
            features.update(start_only(tf.shape(x)[0], self.target_length, self.start_id))
            return keras.utils.pack_x_y_sample_weight(features, None, sample_weight)
        decoder, labels = encode_targets(self.tokenizer, y, self.target_length)
        features.update(decoder)
        return keras.utils.pack_x_y_sample_weight(features, labels, sample_weight)

    # --- generation ------------------------------------------------------------

    def generate(self, model, sources, batch_size=32, strategy="beam", beam_size=4,
                 length_penalty=0.6, max_length=None):
        """Target strings for `sources` (a list of str) from `model`'s
        `generate` (a `Seq2SeqLM`): encoded here, generated `batch_size` at
        a time (at most `max_length` pieces, default T), decoded here.

        Returns:
            list of str, one per source.
        """
        if isinstance(sources, (str, bytes)):
            sources = [sources]
        texts = []
        strings = _strings(list(sources), "source") if len(sources) else None
        for begin in range(0, len(sources), int(batch_size)):
            ids = self.generate_ids(model, strings[begin:begin + int(batch_size)],
                                    strategy=strategy, beam_size=beam_size,
                                    length_penalty=length_penalty, max_length=max_length)
            decoded, _ = decode_generated(self.tokenizer, ids)
            texts.extend(t.decode("utf-8") for t in decoded.numpy().tolist())
        return texts

    def generate_ids(self, model, sources, strategy="beam", beam_size=4, length_penalty=0.6,
                     max_length=None):
        """String tensor [B] -> `model.generate`'s ids int32 [B, L]."""
        encoded = encode_sources(self.tokenizer, sources, self.sequence_length)
        # NumPy in: the model may run under another Keras backend than TensorFlow.
        ids = model.generate(encoded["encoder_token_ids"].numpy(),
                             encoded["encoder_padding_mask"].numpy(),
                             max_length=int(max_length or self.target_length),
                             start_id=self.start_id, end_id=self.end_id, strategy=strategy,
                             beam_size=int(beam_size), length_penalty=float(length_penalty))
        return tf.convert_to_tensor(keras.ops.convert_to_numpy(ids))

    def get_config(self):
        config = super().get_config()
        config["target_length"] = self.target_length
        return config
