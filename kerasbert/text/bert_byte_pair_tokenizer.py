"""ModernBERT's tokenizer (OLMo's byte-level BPE, GPT-NeoX-like) from its
tokenizer.json, in TensorFlow ops."""

import json
import os

import tensorflow as tf
import tensorflow_text as tf_text

from kerasbert.text import hf_tokenizer_files
from kerasbert.text.byte_pair_tokenizer import BytePairTokenizer
from kerasbert.text.families import BERT_BPE
from kerasbert.text.string_ops import byte_to_char
from kerasbert.text.tokenizer_json_files import byte_level_files

#: The normalizers of a tokenizer.json this tokenizer computes.
NORMALIZERS = {None: None, "NFC": "NFC"}


def _pipeline(path):
    """(The normalization form of a byte-level tokenizer.json (None or
    "NFC"), and its post-processor's trim_offsets and add_prefix_space); any other normalizer, a pre-tokenizer other than GPT-2's
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
    return (NORMALIZERS[kind],) + hf_tokenizer_files.offset_trimming(data.get("post_processor"))


class BertBytePairTokenizer(BytePairTokenizer):
    """Byte-level BPE with BERT's special tokens, read from a `tokenizers`
    tokenizer.json (ModernBERT's): the text is NFC-normalized where the file
    says so, split by GPT-2's pattern and merged as `BytePairTokenizer`;
    the added tokens are the file's ([CLS] [SEP] [PAD] [MASK] (lstrip)
    [UNK], and the non-special ones, such as OLMo's runs of spaces, matched
    in the normalized text as `tokenizers` does). Packed `[CLS] a [SEP] b
    [SEP]` (`BertPacker`), as the file's TemplateProcessing.

    Offsets of `tokenize_with_offsets` count characters of the original
    text (before NFC) and keep a piece's leading space unless the file's
    post-processor trims it, as `tokenizers`' do.

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
        self.normalization, trim_offsets, prefix_space = _pipeline(self.tokenizer_json)
        if added_tokens is None:
            added_tokens = hf_tokenizer_files.added_tokens(self.tokenizer_json) or None
        vocabulary_file, merges_file = byte_level_files(self.tokenizer_json)
        super().__init__(vocabulary_file, merges_file, trim_offsets=trim_offsets,
                         offsets_prefix_space=prefix_space,
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

    def _in_normalized(self, normalized, inner, offsets=False):
        """`inner` over normalized text, with the added tokens matched in it."""
        if getattr(self, "_normalized_pattern", None) is None:
            return inner(normalized)
        return self._split_tokenize(normalized, self._normalized_pattern, inner,
                                    offsets=offsets, char_offsets=offsets)

    def _text_pieces(self, batch):
        return self._in_normalized(self._normalize(batch), super()._text_pieces)

    @tf.autograph.experimental.do_not_convert
    def _text_offsets(self, batch):
        """Ids with CHARACTER offsets into `batch` as it was before NFC,
        traced as `tokenizers` traces them: a character NFC composed (an
        "é" from "e\u0301", a Hangul syllable from its jamo) spans the
        first original character it came from."""
        if self.normalization is None:
            return self._in_normalized(batch, super()._text_offsets, offsets=True)
        normalized, offsets_map = tf_text.normalize_utf8_with_offsets_map(
            batch, self.normalization)
        ids, starts, ends = self._in_normalized(normalized, super()._text_offsets, offsets=True)
        source = _SourceCharacters(normalized, offsets_map, batch, ids.value_rowids())
        first = source.of(starts.flat_values)
        last = source.of(tf.maximum(ends.flat_values - 1, starts.flat_values)) + 1
        end = tf.where(ends.flat_values > starts.flat_values, tf.maximum(last, first), first)
        return ids, ids.with_flat_values(first), ids.with_flat_values(end)


class _SourceCharacters:
    """Characters of normalized texts -> the original characters they came
    from, as `tokenizers` aligns them: characters -> bytes of the
    normalized text -> bytes of the original (`find_source_offsets`) ->
    characters. A character with no width in the original (the second of
    an NFC expansion, "क़" into two) came from the character before."""

    def __init__(self, normalized, offsets_map, texts, rows):
        _, char_starts = tf.strings.unicode_decode_with_offsets(normalized, "UTF-8")
        ends = tf.cast(tf.strings.length(normalized, unit="BYTE"), tf.int64)[:, None]
        bounds = tf.concat([char_starts, tf.RaggedTensor.from_tensor(ends)], axis=1)
        self._bounds, self._first = bounds.flat_values, tf.gather(bounds.row_starts(), rows)
        self._chars = tf.gather(bounds.row_lengths() - 1, rows)
        self._map, self._texts, self._rows = offsets_map, texts, rows

    def of(self, positions):
        """Character positions int64 [K] (one per row of `rows`) -> int64 [K]."""
        start = self._source_bytes(positions)
        after = self._source_bytes(tf.minimum(positions + 1, self._chars))
        chars = byte_to_char(self._texts, self._rows, start)
        widthless = (after == start) & (positions < self._chars) & (chars > 0)
        return tf.where(widthless, chars - 1, chars)

    def _source_bytes(self, positions):
        normalized_bytes = tf.gather(self._bounds, self._first + positions)
        num_texts = tf.shape(self._texts, out_type=tf.int64)[0]
        ragged = tf.RaggedTensor.from_value_rowids(normalized_bytes, self._rows, nrows=num_texts)
        # The op refuses a row without positions: each gets a 0 first, dropped after.
        ragged = tf.concat([tf.RaggedTensor.from_tensor(tf.zeros([num_texts, 1], tf.int64)),
                            ragged], axis=1)
        return tf_text.find_source_offsets(self._map, ragged)[:, 1:].flat_values
