"""Packs BPE ids into RoBERTa inputs: `<s> a </s>` or `<s> a </s></s> b </s>`."""

from kerasbert.text.packer import BertPacker


class RobertaPacker(BertPacker):
    """`BertPacker` with RoBERTa's pair layout.

    Layout (fairseq / Hugging Face RoBERTa): `<s> a </s>` or
    `<s> a </s></s> b </s>`, padded with `pad_id`. A pair spends four
    special tokens, so T - 4 pieces are left for `a` and `b`, cut
    longest-first as `BertPacker` does (the longer segment loses its last
    piece, `b` on a tie); a single segment keeps its first T - 2.
    `input_type_ids` is all zeros (RoBERTa has one segment type) and
    `input_mask` is 1 on real tokens.

    Args:
        sequence_length: output length T (>= 4 for pairs, >= 2 for singles).
        start_id, end_id, pad_id: ids of `<s>`, `</s>`, `<pad>` (0, 2, 1 in
            RoBERTa; see `from_tokenizer`).

    Call args and returns: as `BertPacker`.

    Example:

    >>> from kerasbert.text import RobertaPacker
    >>> packer = RobertaPacker(8, start_id=0, end_id=2, pad_id=1)
    >>> pair = packer([[5, 6]], [[7]])                        # <s> a </s></s> b </s> <pad>
    >>> pair["input_word_ids"].numpy().tolist(), int(pair["input_type_ids"].numpy().max())
    ([[0, 5, 6, 2, 2, 7, 2, 1]], 0)
    >>> packer([5, 6, 7, 8, 9, 10, 11])["input_word_ids"].numpy().tolist()   # one example: [T]
    [0, 5, 6, 7, 8, 9, 10, 2]
    """

    pair_separators = 2
    second_type_id = 0

    def __init__(self, sequence_length, start_id, end_id, pad_id, name=None):
        super().__init__(sequence_length, start_id, end_id, pad_id, name=name)
