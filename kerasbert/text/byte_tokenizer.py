"""Character-level (byte) tokenization, as the Reformer's enwik8 model reads
text: each UTF-8 byte b is one token, id b + 2; id 0 is padding and id 1
("</s>") opens and closes every sequence. Nothing to train and no file:
`--vocab bytes` names it.

All TensorFlow ops, so exported SavedModels tokenize and detokenize inside
their graph (`tf.strings.bytes_split`, `tf.io.decode_raw`), with nothing
but `tensorflow` to load.
"""

import tensorflow as tf

from kerasbert.text.families import BYTES
from kerasbert.text.families import byte_vocabulary
from kerasbert.text.families import special_ids
from kerasbert.text.families import word_starts
from kerasbert.text.string_ops import with_char_offsets
from kerasbert.text.subword_tokenizer import SubwordTokenizer

#: id of byte 0 (ids 0 and 1 are <pad> and </s>)
BYTE_OFFSET = 2


class ByteTokenizer(SubwordTokenizer):
    """UTF-8 bytes -> ids (byte + 2), 258 ids in all.

    Special ids: `pad_id` 0, `cls_id` = `sep_id` = 1 ("</s>", the sequence
    boundary), `unk_id` 0 (no text is unknown). There is no [MASK]:
    `mask_id` is None, so masked-LM data and models need another
    vocabulary; causal language models (`--objective none --no-masking`)
    are what bytes are for. Every byte is its own "word".

    Example:

    >>> from kerasbert.text import ByteTokenizer
    >>> tokenizer = ByteTokenizer()
    >>> ids = tokenizer.tokenize_ids(["hé"])   # UTF-8 bytes, shifted past the specials
    >>> ids.to_list()
    [[106, 197, 171]]
    >>> tokenizer.detokenize(ids).numpy()[0].decode("utf-8")
    'hé'
    """

    family = BYTES  # what `kerasbert.text.families` knows it by
    lower_case = False

    def __init__(self, special_tokens_in_strings=False, name=None):
        super().__init__(name=name)
        if special_tokens_in_strings:
            raise ValueError(
                "special_tokens_in_strings does not apply to the byte vocabulary: its "
                "<pad> and </s> are ids no text spells (every string is its UTF-8 bytes).")
        self.special_tokens_in_strings = False
        self.added_tokens = ()
        tokens = byte_vocabulary()
        for attr, value in special_ids(BYTES, tokens, BYTES).items():
            setattr(self, attr, value)
        self.mask_id = None
        self._set_vocabulary(tokens, word_starts(BYTES, tokens))
        self._byte_strings = tf.constant([bytes([b]) for b in range(256)], tf.string)
        self.token_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(tokens),
                                                tf.range(len(tokens), dtype=tf.int32)),
            default_value=self.unk_id)

    # --- tokenization -------------------------------------------------------

    @tf.autograph.experimental.do_not_convert
    def _text_pieces(self, batch):
        chars = tf.strings.bytes_split(batch)  # [B, (bytes)] one-byte strings
        values = tf.io.decode_raw(chars.flat_values, tf.uint8, fixed_length=1)
        ids = tf.cast(tf.reshape(values, [-1]), tf.int32) + BYTE_OFFSET
        return chars.with_flat_values(ids)

    @tf.autograph.experimental.do_not_convert
    def _join_pieces(self, ids):
        # Special ids (padding, </s>) are dropped; the bytes are joined as
        # they are (a cut multi-byte character stays cut).
        ids = tf.ragged.boolean_mask(ids, ids >= BYTE_OFFSET)
        return tf.strings.reduce_join(
            tf.gather(self._byte_strings, ids - BYTE_OFFSET), axis=-1)

    @tf.autograph.experimental.do_not_convert
    def _text_offsets(self, batch):
        """Text -> byte ids with CHARACTER offsets into the text: every byte
        of a character spans that character (`text[start:end]`).

        Returns:
            (ids, starts, ends) as `SubwordTokenizer.tokenize_with_offsets`.
        """
        def with_byte_offsets(joined):
            ids = self._text_pieces(joined)
            starts = tf.cast(tf.ragged.range(ids.row_lengths()), tf.int64)
            return ids, starts, starts + 1

        return with_char_offsets(batch, lambda chars: chars, with_byte_offsets)
