"""BERT WordPiece tokenizer on tensorflow-text, usable in tf.data and graphs.

Built on `tensorflow_text.FastBertTokenizer` (one C++ op for
pre-tokenization and WordPiece), preceded by our own `bert_normalize`.
Measured on the multilingual sample (2 CPU cores, batched tf.data):
FastBertTokenizer ~5 MB/s end to end vs ~1.1 MB/s for `BertTokenizer`
(regex pre-tokenizer); HF `tokenizers` ~1 MB/s. Ids are identical to HF's
BertWordPieceTokenizer on that sample and on an adversarial one (long words,
special-token strings, control characters; tests/text/test_hf_parity.py); the
op's built-in lower-casing is NOT used because it applies NFKC (599 of
16,405 lines differed with it), and its word limit counts bytes, not
characters (`_collapse_long_words` counts them).
"""

import os

import tensorflow as tf

from kerasbert.text.families import WORDPIECE
from kerasbert.text.families import SUFFIX_INDICATOR
from kerasbert.text.families import special_ids
from kerasbert.text.families import word_starts
from kerasbert.text.special_strings import default_added_tokens
from kerasbert.text.string_ops import by_rows
from kerasbert.text.string_ops import lower_case_unicode
from kerasbert.text.string_ops import regex_split_with_offsets
from kerasbert.text.string_ops import with_char_offsets
from kerasbert.text.subword_tokenizer import SubwordTokenizer
from kerasbert.text.vocabulary import load_vocab



# BERT's _clean_text drops NUL, U+FFFD and "control" characters (Unicode
# category C*: Cc, Cf (e.g. zero-width non-joiner U+200C), Co) but not tab,
# newline and carriage return, which are whitespace. Cc spelled out as ranges
# so \t \n \r can be left alone.
_CONTROL_RE = r"[\x{0}-\x{8}\x{B}\x{C}\x{E}-\x{1F}\x{7F}-\x{9F}\p{Cf}\p{Co}\x{FFFD}]"

# BERT's punctuation (RE2 class content): Unicode P* and every ASCII
# non-alphanumeric symbol; each is a word of its own.
PUNCTUATION = r"\p{P}$+<=>^`|~"
# The CJK Unified Ideographs blocks BERT splits into single characters.
CJK = (r"\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}"
       r"\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}")

# keras-hub's WordPiece pre-tokenization (keras_hub.tokenizers.WordPieceTokenizer
# with split_on_cjk, as its BertTokenizer runs it): RE2's ASCII \s, control
# and format characters delimit; ASCII symbols, Unicode punctuation and CJK
# ideographs are words of their own. Its op keeps words of at most 100 bytes.
_KERAS_HUB_PUNCTUATION = r"[!-/]|[:-@]|[\[-`]|[{-~]|[\p{P}]"
_KERAS_HUB_SPLIT = rf"\s|\p{{Cc}}|\p{{Cf}}|{_KERAS_HUB_PUNCTUATION}|[{CJK}]"
_KERAS_HUB_KEEP = rf"{_KERAS_HUB_PUNCTUATION}|[{CJK}]"
KERAS_HUB_MAX_BYTES = 100
#: `normalization` values: BERT's (google-research/bert, HF `tokenizers`),
#: and keras-hub's WordPiece tokenizer's, without or with its accent
#: stripping.
NORMALIZATIONS = ("bert", "keras_hub", "keras_hub_strip_accents")

# Unicode Zs except the ASCII space, spelled out: \p{Zs} would also match
# (and rewrite) every ordinary space, 1.6x slower.
_SPACE_RE = r"[\x{A0}\x{1680}\x{2000}-\x{200A}\x{202F}\x{205F}\x{3000}]"


def bert_normalize(texts, lower_case):
    """BERT's text normalization (google-research/bert tokenization.py).

    Drops control characters, turns space separators (Zs) into " "; with
    `lower_case`, lower-cases (Unicode), decomposes to NFD and removes
    combining marks (Mn), as BERT's `_run_strip_accents`. Hangul syllables decompose into conjoining jamo,
    exactly as in BERT uncased.

    We do this with a few string ops instead of tensorflow-text's built-in
    `lower_case_nfd_strip_accents`, which case-folds with NFKC (fullwidth
    "（" becomes "(", "ﬁ" becomes "fi"); BERT and HF `tokenizers` do not.

    Args:
        texts: string tensor, any shape.

    Returns:
        string tensor, same shape.
    """
    # Plain-ASCII texts (most of most corpora) are only lower-cased: every
    # other step leaves them as they are (`by_rows`).
    return by_rows(texts, tf.strings.lower if lower_case else tf.identity,
                   lambda rows: _bert_normalize_unicode(rows, lower_case))


def _bert_normalize_unicode(texts, lower_case):
    import tensorflow_text as tf_text

    texts = tf.strings.regex_replace(texts, _CONTROL_RE, "")
    # Every space separator (NBSP, ideographic space, ...) is whitespace for
    # BERT; the tensorflow-text op alone would keep NBSP inside a word.
    texts = tf.strings.regex_replace(texts, _SPACE_RE, " ")
    if lower_case:
        # Character by character, as `tokenizers`; the NULs are gone.
        texts = lower_case_unicode(texts, nul_free=True)
        texts = tf_text.normalize_utf8(texts, "NFD")
        texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
    return texts


def _strip_accents(texts):
    """NFD, combining marks (Mn) removed: keras-hub's strip_accents."""
    import tensorflow_text as tf_text

    return tf.strings.regex_replace(tf_text.normalize_utf8(texts, "NFD"), r"\p{Mn}", "")


class WordPieceTokenizer(SubwordTokenizer):
    """BERT WordPiece tokenizer (uncased or cased) over a `vocab.txt`.

    Text is normalized as BERT does: control characters dropped, whitespace
    unified, every CJK ideograph split into its own word, punctuation split
    off; with `lower_case=True` also lower case, NFD and accents (combining
    marks) removed (`bert_normalize`). A word of more than
    `max_chars_per_word` characters (of the normalized text, as BERT and
    the `tokenizers` library count them), or one that cannot be split into
    vocabulary pieces, becomes one `[UNK]`.

    Text like "[MASK]" is text ("[", "mask", "]"), as in BERT, unless
    `special_tokens_in_strings` (`kerasbert.text.special_strings`).

    Special ids are looked up by their strings in the vocabulary, so both the
    original Google layout (`[PAD]`=0, `[UNK]`=100, `[CLS]`=101, `[SEP]`=102,
    `[MASK]`=103) and ours (the first five ids) work.

    All ops are TensorFlow ops: the tokenizer works eagerly, inside
    `tf.data.Dataset.map` and inside `tf.function`s / SavedModels (it is a
    `tf.Module`; the vocabulary file is a tracked asset and the lookup table
    a tracked resource).

    Args:
        vocab_file: path of a `vocab.txt`, one token per line.
        lower_case: BERT "uncased" normalization.
        max_chars_per_word: longer words become `[UNK]` (the `tokenizers`
            library and transformers' BertTokenizer: 100, google-research/bert:
            200; a tokenizer.json states its own). None: no limit.
        special_tokens_in_strings: match the special tokens in text, as the
            `tokenizers` library does (default False: text is text).
        added_tokens: the `AddedToken`s the source registers (a
            tokenizer.json's added_tokens); None: [PAD] [UNK] [CLS] [SEP]
            [MASK], as transformers' BertTokenizer registers them.
        normalization: "bert" (above), or "keras_hub" /
            "keras_hub_strip_accents": the text as keras-hub's WordPiece
            tokenizer (its BertTokenizer) reads it, for a keras-hub preset's
            vocabulary: no control-character clean-up, words split at ASCII
            whitespace, control / format characters, punctuation and CJK
            ideographs, lower case by NFKC case folding of each word, words
            over 100 bytes `[UNK]` (`max_chars_per_word` does not apply).
            Offsets of a word whose case folding changes its length span
            the whole word.
        truncate_at_nul: drop the text after a NUL character, as keras-hub's
            tokenizers do (their tensorflow-text regex split reads C
            strings); default False: no text is dropped.

    Example:

    >>> import os, tempfile
    >>> from kerasbert.text import WordPieceTokenizer, write_vocab
    >>> vocab = os.path.join(tempfile.mkdtemp(), "vocab.txt")
    >>> write_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    ...              "hello", "world", "!", "##s", "good"], vocab)
    >>> tokenizer = WordPieceTokenizer(vocab)
    >>> ids = tokenizer.tokenize_ids(["Hello world!"])      # [B, (pieces)] int32
    >>> ids.to_list()
    [[5, 6, 7]]
    >>> tokenizer.tokenize(["Hello worlds"]).to_list()      # [B, (words), (pieces)]
    [[[5], [6, 8]]]
    >>> tokenizer.detokenize(ids).numpy()
    array([b'hello world !'], dtype=object)
    """

    family = WORDPIECE  # what `kerasbert.text.families` knows it by

    def __init__(self, vocab_file, lower_case=True, max_chars_per_word=100,
                 special_tokens_in_strings=False, added_tokens=None, normalization="bert",
                 truncate_at_nul=False, name=None):
        super().__init__(name=name)
        import tensorflow_text as tf_text

        vocab_file = os.fspath(vocab_file)
        self._vocab = load_vocab(vocab_file)
        self._vocab_path = vocab_file
        self.lower_case = bool(lower_case)
        if max_chars_per_word is not None and (
                isinstance(max_chars_per_word, bool) or not isinstance(max_chars_per_word, int)
                or max_chars_per_word < 1):
            raise ValueError(f"max_chars_per_word must be a positive integer or None, got "
                             f"{max_chars_per_word!r}.")
        if normalization not in NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {', '.join(NORMALIZATIONS)}, got "
                             f"{normalization!r}.")
        self.normalization = normalization
        self.truncate_at_nul = bool(truncate_at_nul)
        self._keras_hub = normalization != "bert"
        # keras-hub's limit is its op's 100 bytes.
        self.max_chars_per_word = None if self._keras_hub else max_chars_per_word
        for attr, value in special_ids(WORDPIECE, self._vocab, vocab_file).items():
            setattr(self, attr, value)

        # Tracked, so an exported SavedModel carries assets/<vocab file name>.
        self.vocab_asset = tf.saved_model.Asset(vocab_file)
        if self._keras_hub:
            self._fast = tf_text.FastWordpieceTokenizer(
                vocab=self._vocab, token_out_type=tf.int32, unknown_token="[UNK]",
                suffix_indicator=SUFFIX_INDICATOR, max_bytes_per_word=KERAS_HUB_MAX_BYTES,
                no_pretokenization=True, support_detokenization=True)
        else:
            self._fast = self._fast_bert(tf_text)
        # Word boundaries come back from the pieces: a word starts at every
        # piece that is not a "##" suffix (as whole-word masking in the
        # original create_pretraining_data.py decides it).
        # "##" alone is a normal token (never produced as a suffix piece).
        starts = word_starts(WORDPIECE, self._vocab)
        self._set_vocabulary(self._vocab, starts)
        self._is_suffix = tf.constant([not s for s in starts], tf.bool)
        # Characters of the text each piece stands for ("##" left out; 0 for
        # [UNK], whose word is [UNK] already): a word's characters are the
        # sum over its pieces, with no offsets needed.
        self._piece_chars = tf.constant(
            [0 if t == "[UNK]" else len(t) - (0 if s else len(SUFFIX_INDICATOR))
             for t, s in zip(self._vocab, starts)], tf.int32)
        self.token_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                self._tokens, tf.range(len(self._vocab), dtype=tf.int32)
            ),
            default_value=self.unk_id,
        )
        self._set_added_tokens(
            default_added_tokens(WORDPIECE, self._vocab) if added_tokens is None else added_tokens,
            special_tokens_in_strings, vocab_file, normalize=self._normalize_strings)

    def _fast_bert(self, tf_text):
        return tf_text.FastBertTokenizer(
            vocab=self._vocab,
            token_out_type=tf.int32,
            unknown_token="[UNK]",
            suffix_indicator=SUFFIX_INDICATOR,
            # The op counts UTF-8 bytes; a word of N characters has at most
            # 4N, so the op passes every word we may keep and
            # `_collapse_long_words` counts the characters.
            max_bytes_per_word=_UNLIMITED_BYTES if self.max_chars_per_word is None
            else 4 * self.max_chars_per_word,
            # Normalization is ours (bert_normalize); the op then only
            # cleans whitespace, splits words/punctuation/CJK and WordPieces.
            lower_case_nfd_strip_accents=False,
            support_detokenization=True,
        )

    def _normalize_strings(self, strings):
        return [s.decode("utf-8") for s in
                self._normalize(tf.constant(strings, tf.string)).numpy()]

    def _normalize(self, texts):
        """The text normalization before the words are split (string [N])."""
        if not self._keras_hub:
            return bert_normalize(texts, self.lower_case)
        return _strip_accents(texts) if self.normalization.endswith("strip_accents") else texts

    # --- vocabulary ---------------------------------------------------------

    @property
    def vocab_file(self):
        return self._vocab_path

    # --- tokenization -------------------------------------------------------

    @tf.autograph.experimental.do_not_convert
    def _wordpiece(self, normalized):
        """Normalized [N] -> (ids, start bytes, end bytes) [N, (pieces)]:
        the op's pieces, words over `max_chars_per_word` characters as one
        [UNK] spanning the word."""
        ids, starts, ends = self._fast.tokenize_with_offsets(normalized)
        if self.max_chars_per_word is None:
            return ids, starts, ends
        return _collapse_long_words(normalized, ids, self._piece_chars, self._is_suffix,
                                    self.max_chars_per_word, self.unk_id, starts, ends)

    @tf.autograph.experimental.do_not_convert
    def _wordpiece_ids(self, normalized):
        """`_wordpiece`'s ids, without offsets."""
        ids = self._fast.tokenize(normalized)
        if self.max_chars_per_word is None:
            return ids
        return _collapse_long_words(normalized, ids, self._piece_chars, self._is_suffix,
                                    self.max_chars_per_word, self.unk_id)

    def _in_normalized(self, normalized, offsets):
        """The pieces of normalized text, cut first at the added tokens
        matched in normalized text (`normalized=True` ones)."""
        if self._keras_hub:
            pieces = lambda t: self._keras_hub_pieces(t, offsets)
        else:
            pieces = self._wordpiece if offsets else self._wordpiece_ids
        if self._normalized_pattern is None:
            return pieces(normalized)
        return self._split_tokenize(normalized, self._normalized_pattern, pieces, offsets=offsets)

    def _text_pieces(self, batch):
        return self._in_normalized(self._normalize(batch), offsets=False)

    def _join_pieces(self, ids):
        # "##" pieces join their word; words are separated by spaces.
        return self._fast.detokenize(ids)

    @tf.autograph.experimental.do_not_convert
    def _text_offsets(self, batch):
        """Text -> WordPiece ids with CHARACTER offsets into the ORIGINAL text.

        Normalization (lower case, NFD, accent stripping, dropped control
        characters) changes lengths, so the offsets of the tokenizer op (UTF-8
        bytes of the normalized text) are mapped back: every original character
        is normalized on its own (`bert_normalize` is character-local), the
        normalized pieces are joined and tokenized, and each token's byte span
        is traced to the original characters it came from. `text[start:end]`
        (Python `str`, code points) is then the original text of the token,
        accents and case included. A token that starts inside one
        character's normalization (a Hangul syllable decomposed into jamo and
        split between pieces) maps to that whole character, so neighbouring
        pieces can share a character. A word over `max_chars_per_word`
        characters is one [UNK] spanning the whole word.
        """
        return with_char_offsets(batch, self._normalize,
                                 lambda joined: self._in_normalized(joined, offsets=True))

    @tf.autograph.experimental.do_not_convert
    def _keras_hub_pieces(self, texts, offsets):
        """keras-hub's words of `texts` [N] (normalized), case-folded when
        lower-casing, then WordPiece: ids [N, (pieces)], with `offsets`
        also start / end bytes into `texts` (a word whose case folding
        changed its length: the word's span for each of its pieces)."""
        import tensorflow_text as tf_text

        # The ops keras-hub runs, so that the ids are its ids; the split reads
        # past a NUL (a delimiter, as \x01 is), which keras-hub's does not:
        # `truncate_at_nul` cut the text there already when asked to.
        words, starts, ends = regex_split_with_offsets(texts, _KERAS_HUB_SPLIT, _KERAS_HUB_KEEP)
        flat = words.flat_values
        folded = tf_text.case_fold_utf8(flat) if self.lower_case else flat
        if not offsets:
            return words.with_flat_values(self._fast.tokenize(folded)).merge_dims(1, 2)
        ids, piece_starts, piece_ends = self._fast.tokenize_with_offsets(folded)
        word_start, word_end = starts.flat_values, ends.flat_values
        same = tf.equal(tf.strings.length(folded), tf.strings.length(flat))
        of_piece = ids.value_rowids()
        base = tf.gather(word_start, of_piece)
        exact = tf.gather(same, of_piece)
        piece_starts = tf.where(exact, base + piece_starts.flat_values, base)
        piece_ends = tf.where(exact, base + piece_ends.flat_values,
                              tf.gather(word_end, of_piece))
        by_text = lambda t: words.with_flat_values(ids.with_flat_values(t)).merge_dims(1, 2)
        return by_text(ids.flat_values), by_text(piece_starts), by_text(piece_ends)


# Effectively no byte limit for the op (its argument is an int32).
_UNLIMITED_BYTES = 2**31 - 1


def _collapse_long_words(texts, ids, piece_chars, is_suffix, max_chars, unk_id, starts=None,
                         ends=None):
    """Every word of more than `max_chars` characters -> one `unk_id`.

    A word is a piece that is no "##" suffix and the suffixes after it; its
    characters are the sum of its pieces' (`piece_chars`), which spell the
    normalized word exactly.

    Args:
        texts: string [N], the normalized texts the pieces come from: a
            batch where none holds more than `max_chars` characters between
            whitespace (tab, newline, form feed, return, space: no word
            reaches across them) has no word that long, and skips the rest
            (most batches).
        ids: int32 `tf.RaggedTensor` [N, (pieces)].
        piece_chars: int32 [V], characters per id.
        is_suffix: bool [V], per id.
        max_chars: int.
        unk_id: int.
        starts, ends: optional offsets, same shape as `ids`; an [UNK]
            spans its whole word.

    Returns:
        ids, or (ids, starts, ends) with `starts` / `ends`, same structure,
        long words collapsed.
    """
    def collapse():
        # Plain tensor ops on the flat pieces and the row splits: few graph
        # nodes (every tf.data iterator optimizes its map function anew, at
        # about half a millisecond a node).
        flat = ids.flat_values
        splits = ids.row_splits
        size = tf.size(flat, out_type=splits.dtype)
        # A text's first piece starts a word whatever it is (a stray "##x").
        first = tf.scatter_nd(splits[:-1, None], tf.ones_like(splits[:-1], tf.int32),
                              [size + 1])[:-1] > 0
        begins = tf.logical_not(tf.gather(is_suffix, flat)) | first
        word = tf.cumsum(tf.cast(begins, tf.int64)) - 1
        chars = tf.math.unsorted_segment_sum(tf.gather(piece_chars, flat), word, size)
        collapsed = tf.gather(chars > max_chars, word)
        keep = begins | tf.logical_not(collapsed)
        kept_before = tf.concat([[0], tf.cumsum(tf.cast(keep, splits.dtype))], 0)
        new_splits = tf.gather(kept_before, splits)

        def kept(values):
            return tf.RaggedTensor.from_row_splits(tf.boolean_mask(values, keep), new_splits,
                                                   validate=False)

        new_ids = kept(tf.where(collapsed, tf.constant(unk_id, flat.dtype), flat))
        if starts is None:
            return new_ids
        word_end = tf.math.unsorted_segment_max(ends.flat_values, word, size)
        return (new_ids, kept(starts.flat_values),
                kept(tf.where(collapsed, tf.gather(word_end, word), ends.flat_values)))

    # Only a text of more than max_chars bytes can hold such a run. RE2
    # counts to 1000 at most: a longer limit checks for runs of 1000 (more
    # batches take the collapse, which then finds nothing to do).
    run = min(max_chars + 1, 1000)
    longer = tf.boolean_mask(texts, tf.strings.length(texts) > max_chars)
    maybe_long = tf.reduce_any(tf.strings.regex_full_match(
        longer, f"(?s).*[^\\t\\n\\f\\r ]{{{run}}}.*"))
    unchanged = ids if starts is None else (ids, starts, ends)
    return tf.cond(maybe_long, collapse, lambda: unchanged)
