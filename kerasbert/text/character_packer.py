"""`CharacterPacker`: ELMo's character ids per word -> the backbone's two
inputs at a fixed number of words T (the `BertPacker` of a model that reads
characters)."""

import tensorflow as tf


class CharacterPacker(tf.Module):
    """Cuts each row to its first T words and pads it to T.

    Args:
        sequence_length: T, words per row (>= 1).
        max_characters: C, ids per word.

    Call args:
        a: ragged int32 [B, (W), C] (`CharacterTokenizer.tokenize_ids`).
        b: must be None: ELMo reads one text, no segment pairs.

    Returns:
        {"input_char_ids": int32 [B, T, C], "input_mask": int32 [B, T]}
        (id 0 and mask 0 past a row's words).

    Example:
        >>> from kerasbert.text import CharacterTokenizer
        >>> tokenizer = CharacterTokenizer(max_characters=8)
        >>> packed = CharacterPacker(4, 8)(tokenizer.tokenize_ids(["Hi there", "a b c d e"]))
        >>> packed["input_char_ids"].shape.as_list(), packed["input_mask"].numpy().tolist()
        ([2, 4, 8], [[1, 1, 0, 0], [1, 1, 1, 1]])
    """

    def __init__(self, sequence_length, max_characters, name=None):
        super().__init__(name=name)
        self.sequence_length = int(sequence_length)
        if self.sequence_length < 1:
            raise ValueError(f"sequence_length must be at least 1, got {sequence_length}.")
        self.max_characters = int(max_characters)

    def __call__(self, a, b=None):
        if b is not None:
            raise ValueError("ELMo reads one text: a second segment cannot be packed.")
        kept = a[:, :self.sequence_length]
        shape = [None, self.sequence_length, self.max_characters]
        ids = kept.to_tensor(0, shape=shape)
        mask = tf.sequence_mask(kept.row_lengths(), self.sequence_length, tf.int32)
        return {"input_char_ids": ids, "input_mask": mask}
