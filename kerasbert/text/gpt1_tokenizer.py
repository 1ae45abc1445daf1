"""GPT-1's (`openai-gpt`) BPE tokenizer in TensorFlow ops.

Reads the published `vocab.json` + `merges.txt` and gives the ids of
Hugging Face's `OpenAIGPTTokenizerFast` (the `tokenizers` pipeline
BertNormalizer(lowercase) -> BertPreTokenizer -> BPE with the word-end
suffix "</w>"), checked in tests/text/test_gpt1_tokenizer.py. The original
release pre-tokenized with ftfy and spaCy; Hugging Face's fast tokenizer,
what users of the checkpoint run today, uses BERT's rules instead, and so
do we.

Steps:
  1. BERT's normalization, lower-cased (`bert_normalize`: control
     characters dropped, accents stripped).
  2. Words: split at Unicode whitespace; every punctuation character and
     CJK ideograph is a word of its own.
  3. Each word's characters, the last one with "</w>" appended, are merged
     by merges.txt's ranks exactly as byte-level BPE does
     (`byte_pair_tokenizer.apply_merges`). A character outside the
     vocabulary becomes `<unk>` (there is no byte fallback).

GPT-1's vocabulary has no start, separator, padding or mask token. The
zoo's packing and fine-tuning need them, so `<s>`, `<pad>`, `</s>` and
`<mask>` (and `<unk>`, for characters outside the vocabulary, where the
file lacks it) are appended after the published ids (`added_ids`); a backbone
loaded from the checkpoint grows its embedding table to match when it is
fine-tuned (`kerasbert.models.vocabulary_growth`), and generation from the
published model never feeds them.
"""

import tensorflow as tf

from kerasbert.text.byte_pair_tokenizer import BpeFiles
from kerasbert.text.byte_pair_tokenizer import apply_merges
from kerasbert.text.byte_pair_tokenizer import check_merges
from kerasbert.text.byte_pair_tokenizer import lookup_table
from kerasbert.text.byte_pair_tokenizer import merge_rank_table
from kerasbert.text.families import GPT1_BPE
from kerasbert.text.families import SPECIAL_TOKENS
from kerasbert.text.families import WORD_END
from kerasbert.text.families import with_added_specials
from kerasbert.text.special_strings import default_added_tokens
from kerasbert.text.string_ops import regex_split_op
from kerasbert.text.string_ops import with_char_offsets
from kerasbert.text.subword_tokenizer import SubwordTokenizer
from kerasbert.text.tokenizer import CJK as _CJK
from kerasbert.text.tokenizer import PUNCTUATION as _PUNCT
from kerasbert.text.tokenizer import bert_normalize

# Unicode White_Space: BertPreTokenizer splits on Rust's char::is_whitespace.
_WS = (r"\t\n\x{B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}"
       r"\x{202F}\x{205F}\x{3000}")
_SPLIT_RE = rf"[{_WS}]|[{_PUNCT}{_CJK}]"
_KEEP_RE = rf"[{_PUNCT}{_CJK}]"


class Gpt1Tokenizer(BpeFiles, SubwordTokenizer):
    """GPT-1's lower-cased BPE with "</w>" word ends, with the interface of
    `WordPieceTokenizer`.

    Text like "<mask>" is text: user input cannot inject special tokens,
    unless `special_tokens_in_strings` (`kerasbert.text.special_strings`;
    only the special tokens of the published vocabulary, `<unk>`, since
    those appended here are no strings of the source). A word ends at a
    piece ending in "</w>", so a word starts at the piece after one (or at
    a text's first piece).

    Args:
        vocabulary_file: GPT-1's `vocab.json` ({token: id}).
        merges_file: its `merges.txt`.
        special_tokens_in_strings: match the special tokens in text, as the
            `tokenizers` library does (default False: text is text).
        added_tokens: the `AddedToken`s the source registers (a
            tokenizer.json's added_tokens); None: the published
            vocabulary's `<unk>`, as transformers' OpenAIGPTTokenizer.
        truncate_at_nul: drop the text after a NUL character (default
            False: no text is dropped; `SubwordTokenizer`).

    Attributes:
        published_size: ids the vocabulary file holds (40478 for GPT-1).
        added_ids: ids of the special tokens appended after them.

    Example:

    >>> import json, os, tempfile
    >>> from kerasbert.text import Gpt1Tokenizer
    >>> folder = tempfile.mkdtemp()
    >>> pieces = ["<unk>", "h", "e", "l", "o", "o</w>", "w", "r", "d</w>", "!</w>",
    ...           "he", "hel", "hell", "hello</w>"]
    >>> with open(os.path.join(folder, "vocab.json"), "w") as f:
    ...     json.dump({piece: i for i, piece in enumerate(pieces)}, f)
    >>> with open(os.path.join(folder, "merges.txt"), "w") as f:
    ...     _ = f.write("#version: 0.2\\nh e\\nhe l\\nhel l\\nhell o</w>\\n")
    >>> tokenizer = Gpt1Tokenizer(os.path.join(folder, "vocab.json"),
    ...                           os.path.join(folder, "merges.txt"))
    >>> tokenizer.tokenize(["Hello world!"]).to_list()   # [B, (words), (pieces)]
    [[[13], [6, 4, 7, 3, 8], [9]]]
    >>> tokenizer.published_size, sorted(tokenizer.added_ids)   # <s> <pad> </s> <mask>
    (14, [14, 15, 16, 17])
    """

    family = GPT1_BPE  # what `kerasbert.text.families` knows it by

    lower_case = True

    def __init__(self, vocabulary_file, merges_file, special_tokens_in_strings=False,
                 added_tokens=None, truncate_at_nul=False, name=None):
        super().__init__(name=name)
        self.truncate_at_nul = bool(truncate_at_nul)
        published = self._read_files(vocabulary_file, merges_file)
        vocabulary_file, merges_file = self._vocab_path, self._merges_path
        tokens, added = with_added_specials(GPT1_BPE, published)
        self.published_size = len(published)
        index = {token: i for i, token in enumerate(tokens)}
        for attr, token in SPECIAL_TOKENS[GPT1_BPE].items():
            setattr(self, attr, index[token])
        self.added_ids = frozenset(range(len(published), len(tokens)))
        check_merges(self._merges, index, merges_file, vocabulary_file)
        # word_start is contextual here (the piece before ends a word):
        # `_begins_word` below uses the word-end table instead.
        self._set_vocabulary(tokens, [False] * len(tokens))
        specials = set(SPECIAL_TOKENS[GPT1_BPE].values())
        self._word_end = tf.constant([t.endswith(WORD_END) or t in specials for t in tokens])
        self.token_table = lookup_table(self._tokens, tf.range(len(tokens)), self.unk_id)
        self.merge_table = merge_rank_table(self._merges)
        self._set_added_tokens(
            default_added_tokens(GPT1_BPE, published) if added_tokens is None else added_tokens,
            special_tokens_in_strings, vocabulary_file,
            normalize=lambda strings: [s.decode("utf-8") for s in bert_normalize(
                tf.constant(strings, tf.string), lower_case=True).numpy()])

    # --- the pipeline -------------------------------------------------------

    @tf.autograph.experimental.do_not_convert
    def _words(self, batch):
        """Normalized [B] texts -> words (flat [W]), their byte starts [W]
        and words per text [B] (int64)."""
        # NUL-free: BERT's normalization removed it.
        words, starts, _ = regex_split_op(batch, _SPLIT_RE, _KEEP_RE)
        return words.flat_values, starts.flat_values, words.row_lengths()

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def _merge_words(self, words):
        """Distinct words [U] -> (pieces [S], word of each piece [S])."""
        chars = tf.strings.unicode_split(words, "UTF-8")
        flat = chars.flat_values
        last = chars.row_limits() - 1
        flat = tf.tensor_scatter_nd_update(
            flat, last[:, tf.newaxis], tf.strings.join([tf.gather(flat, last), WORD_END]))
        num_words = tf.shape(words, out_type=tf.int64)[0]
        return apply_merges(flat, chars.value_rowids(), num_words, self.merge_table)

    @tf.autograph.experimental.do_not_convert
    def _encode(self, normalized):
        """Normalized [B] -> ids [B, (pieces)], piece byte starts and ends
        (int64, same shape) in the normalized text."""
        words, word_starts, counts = self._words(normalized)
        unique, index = tf.unique(words)
        symbols, rows = self._merge_words(unique)
        ids = self.token_table.lookup(symbols)
        text = tf.strings.regex_replace(symbols, WORD_END + "$", "")
        lengths = tf.cast(tf.strings.length(text, unit="BYTE"), tf.int64)
        per_unique = tf.RaggedTensor.from_value_rowids(
            tf.stack([tf.cast(ids, tf.int64), lengths], axis=-1), rows,
            nrows=tf.shape(unique, out_type=tf.int64)[0], validate=False)
        pieces = tf.gather(per_unique, index)  # [W, (pieces), 2]
        ids, lengths = pieces[..., 0], pieces[..., 1]
        within = tf.cumsum(lengths.flat_values, exclusive=True)
        within -= tf.gather(tf.gather(within, lengths.row_starts()), lengths.value_rowids())
        starts = tf.gather(word_starts, lengths.value_rowids()) + within
        by_text = lambda r: tf.RaggedTensor.from_row_lengths(r, counts, validate=False).merge_dims(1, 2)
        return (by_text(tf.cast(ids, tf.int32)), by_text(lengths.with_flat_values(starts)),
                by_text(lengths.with_flat_values(starts + lengths.flat_values)))

    def _in_normalized(self, normalized, offsets):
        """Pieces of normalized text, cut first at the `normalized` added
        tokens; (ids, start bytes, end bytes), or ids alone."""
        if self._normalized_pattern is None:
            return self._encode(normalized) if offsets else self._encode(normalized)[0]
        inner = self._encode if offsets else (lambda s: self._encode(s)[0])
        return self._split_tokenize(normalized, self._normalized_pattern, inner, offsets=offsets)

    def _text_pieces(self, batch):
        return self._in_normalized(bert_normalize(batch, lower_case=True), offsets=False)

    def _join_pieces(self, ids):
        # "</w>" ends a word: it becomes the space between words.
        joined = tf.strings.reduce_join(tf.gather(self._tokens, ids), axis=-1)
        return tf.strings.strip(tf.strings.regex_replace(joined, WORD_END, " "))

    def _begins_word(self, flat):
        # A piece begins a word when the piece before it ends one ("</w>" or
        # a special token); a text's first piece is handled by `starts_word`.
        return tf.gather(self._word_end, tf.concat([flat[:1], flat[:-1]], 0))

    def _text_offsets(self, batch):
        """Text -> ids with CHARACTER offsets into the original text (see
        `WordPieceTokenizer._text_offsets`; a piece's span leaves its
        "</w>" out).

        Returns:
            (ids, starts, ends): int32 ids and int64 offsets, ragged
            [B, (pieces)].
        """
        return with_char_offsets(
            batch, lambda chars: bert_normalize(chars, lower_case=True),
            lambda joined: self._in_normalized(joined, offsets=True))
