"""ModernBERT's tokenizer (OLMo's byte-level BPE, GPT-NeoX-like) from its
tokenizer.json, in TensorFlow ops."""

import json
import os

import tensorflow as tf
import tensorflow_text as tf_text

from kerasbert.text import hf_tokenizer_files
from kerasbert.text.byte_pair_tokenizer import BytePairTokenizer
from kerasbert.text.families import BERT_BPE
from kerasbert.text.tokenizer_json_files import byte_level_files

#: The normalizers of a tokenizer.json this tokenizer computes.
NORMALIZERS = {None: None, "NFC": "NFC"}


def _pipeline(path):
    """The normalization form of a byte-level tokenizer.json (None or
    "NFC"); any other normalizer, a pre-tokenizer other than GPT-2's
    ByteLevel without a prefix space, or BPE options that change the ids
    are refused naming the file and the step."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    normalizer = data.get("normalizer")
    kind = normalizer.get("type") if isinstance(normalizer, dict) else None
    if normalizer is not None and kind not in NORMALIZERS:
        raise ValueError(f"{path}: normalizer {json.dumps(normalizer)[:100]} is not computed "
                         "here (none, or NFC).")
    pre = data.get("pre_tokenizer") or {}
    if (pre.get("type") != "ByteLevel" or pre.get("add_prefix_space", False)
            or not pre.get("use_regex", True)):
        raise ValueError(f"{path}: pre_tokenizer {json.dumps(pre)[:100]} is not computed here "
                         "(ByteLevel, add_prefix_space false, use_regex true).")
    model = data.get("model") or {}
    for key in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise ValueError(f"{path}: BPE {key}={model[key]!r} is not computed here.")
    if model.get("ignore_merges") or model.get("byte_fallback"):
        raise ValueError(f"{path}: BPE ignore_merges / byte_fallback is not computed here.")
    return NORMALIZERS[kind]


class BertBytePairTokenizer(BytePairTokenizer):
    """Byte-level BPE with BERT's special tokens, read from a `tokenizers`
    tokenizer.json (ModernBERT's): the text is NFC-normalized where the file
    says so, split by GPT-2's pattern and merged as `BytePairTokenizer`;
    the added tokens are the file's ([CLS] [SEP] [PAD] [MASK] (lstrip)
    [UNK], and the non-special ones, such as OLMo's runs of spaces, matched
    in the normalized text as `tokenizers` does). Packed `[CLS] a [SEP] b
    [SEP]` (`BertPacker`), as the file's TemplateProcessing.

    Offsets of `tokenize_with_offsets` count characters of the normalized
    text: the original's wherever NFC leaves the text unchanged.

    Args:
        tokenizer_json: path of the tokenizer.json.
        special_tokens_in_strings, added_tokens, truncate_at_nul:
            `BytePairTokenizer`'s (added_tokens None: the file's own).

    Example:

    >>> import tempfile
    >>> from tokenizers import Tokenizer, models, pre_tokenizers, normalizers, processors
    >>> vocab = {c: i for i, c in enumerate(["[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]",
    ...                                      "h", "i", "Ġ", "hi", "Ġhi"])}
    >>> hf = Tokenizer(models.BPE(vocab, [("h", "i"), ("Ġ", "hi")]))
    >>> hf.normalizer = normalizers.NFC()
    >>> hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    >>> hf.add_special_tokens(["[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"])
    5
    >>> hf.post_processor = processors.TemplateProcessing(
    ...     single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
    ...     special_tokens=[("[CLS]", 0), ("[SEP]", 1)])
    >>> path = tempfile.mkdtemp() + "/tokenizer.json"
    >>> hf.save(path)
    >>> tokenizer = BertBytePairTokenizer(path)
    >>> tokenizer.tokenize_ids(["hi hi"]).to_list(), hf.encode("hi hi", add_special_tokens=False).ids
    ([[8, 9]], [8, 9])
    >>> tokenizer.cls_id, tokenizer.sep_id, tokenizer.pad_id
    (0, 1, 2)
    """

    family = BERT_BPE

    def __init__(self, tokenizer_json, special_tokens_in_strings=False, added_tokens=None,
                 truncate_at_nul=False, name=None):
        self.tokenizer_json = os.fspath(tokenizer_json)
        self.normalization = _pipeline(self.tokenizer_json)
        if added_tokens is None:
            added_tokens = hf_tokenizer_files.added_tokens(self.tokenizer_json) or None
        vocabulary_file, merges_file = byte_level_files(self.tokenizer_json)
        super().__init__(vocabulary_file, merges_file,
                         special_tokens_in_strings=special_tokens_in_strings,
                         added_tokens=added_tokens, truncate_at_nul=truncate_at_nul, name=name)

    def _normalize(self, texts):
        """string [N] -> the text the model reads (NFC where the file says)."""
        if self.normalization is None:
            return texts
        return tf_text.normalize_utf8(texts, self.normalization)

    def _normalize_strings(self, strings):
        return [s.decode("utf-8") for s in
                self._normalize(tf.constant(strings, tf.string)).numpy()]

    def _in_normalized(self, texts, inner, offsets=False):
        normalized = self._normalize(texts)
        if getattr(self, "_normalized_pattern", None) is None:
            return inner(normalized)
        return self._split_tokenize(normalized, self._normalized_pattern, inner,
                                    offsets=offsets, char_offsets=offsets)

    def _text_pieces(self, batch):
        return self._in_normalized(batch, super()._text_pieces)

    def _text_offsets(self, batch):
        return self._in_normalized(batch, super()._text_offsets, offsets=True)
