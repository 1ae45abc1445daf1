"""Text -> ELMo's character input, in TensorFlow ops (tf.data, exported
graphs): words split as BERT's basic tokenizer splits them (whitespace,
punctuation, one word per CJK ideograph; no lower-casing: ELMo is cased),
then each word's UTF-8 bytes numbered as `kerasbert.text.elmo_characters`
says (the published biLM's ids)."""

import tensorflow as tf
from tensorflow_text.python.ops.bert_tokenizer import BasicTokenizer

from kerasbert.text.elmo_characters import BEGIN_WORD
from kerasbert.text.elmo_characters import END_WORD
from kerasbert.text.elmo_characters import MAX_CHARACTERS
from kerasbert.text.elmo_characters import PAD_CHARACTER
from kerasbert.text.tokenizer import bert_normalize


def split_words(texts):
    """tf.string [B] -> ragged tf.string [B, (W)] words."""
    texts = tf.convert_to_tensor(texts, tf.string)
    return BasicTokenizer(lower_case=False).tokenize(bert_normalize(texts, False))


def words_to_char_ids(words, max_characters=MAX_CHARACTERS, max_words=None, pad=False):
    """Ragged words [B, (W)] -> (char ids int32 [B, W, max_characters],
    mask int32 [B, W]); W is the longest row, or `max_words` (longer rows
    are cut; with `pad`, W is max_words). Equal to
    `elmo_characters.batch_char_ids` on the same words."""
    if max_words is not None:
        words = words[:, :max_words]
    flat = words.flat_values
    pieces = tf.strings.bytes_split(flat)  # [N, (L)] one-byte strings
    values = tf.cast(tf.reshape(tf.io.decode_raw(pieces.flat_values, tf.uint8), [-1]), tf.int32)
    data = pieces.with_flat_values(values + 1)[:, :max_characters - 2]
    rows = tf.shape(flat)[0]
    framed = tf.concat([tf.fill([rows, 1], BEGIN_WORD), data, tf.fill([rows, 1], END_WORD)],
                       axis=1)
    dense = framed.to_tensor(default_value=PAD_CHARACTER, shape=[None, max_characters])
    shape = [None, max_words if pad else None, max_characters]
    ids = tf.RaggedTensor.from_row_splits(dense, words.row_splits).to_tensor(0, shape=shape)
    mask = tf.sequence_mask(words.row_lengths(), tf.shape(ids)[1], tf.int32)
    return ids, mask


def texts_to_char_ids(texts, max_characters=MAX_CHARACTERS, max_words=None):
    """tf.string [B] -> (char ids, mask, words): `split_words` then
    `words_to_char_ids`."""
    words = split_words(texts)
    if max_words is not None:
        words = words[:, :max_words]
    ids, mask = words_to_char_ids(words, max_characters)
    return ids, mask, words


def split_words_with_offsets(texts):
    """`split_words` with each word's span in the ORIGINAL text.

    The normalization (`bert_normalize`: control characters dropped,
    space separators made " ") changes byte lengths, but it acts on each
    character alone: every character is normalized on its own, the results
    joined and split, and each word's byte span traced back to the
    characters it came from.

    Args:
        texts: tf.string [B], valid UTF-8 (`clean_text`).

    Returns:
        (words string, starts int64, ends int64), ragged [B, (W)]: the words
        of `split_words(texts)`; code-point offsets, end exclusive.
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    chars = tf.strings.unicode_split(texts, "UTF-8")  # [B, (characters)]
    normalized = bert_normalize(chars.flat_values, False)
    char_end = tf.cumsum(tf.cast(tf.strings.length(normalized), tf.int64))  # exclusive ends
    first_char = chars.row_starts()  # [B]
    text_base = tf.gather(tf.concat([[0], char_end], 0), first_char)
    joined = tf.strings.reduce_join(chars.with_flat_values(normalized), axis=1)
    words, start_bytes, end_bytes = BasicTokenizer(lower_case=False).tokenize_with_offsets(joined)
    row = words.value_rowids()
    base, first = tf.gather(text_base, row), tf.gather(first_char, row)
    # The character holding a byte: the first whose end is past it.
    start = tf.searchsorted(char_end, base + tf.cast(start_bytes.flat_values, tf.int64),
                            side="right", out_type=tf.int64)
    last = tf.searchsorted(char_end, base + tf.cast(end_bytes.flat_values, tf.int64) - 1,
                           side="right", out_type=tf.int64)
    return words, words.with_flat_values(start - first), words.with_flat_values(last + 1 - first)
