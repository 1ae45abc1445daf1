"""BERT WordPiece tokenizer on tensorflow-text, usable in tf.data and graphs.

Built on `tensorflow_text.FastBertTokenizer` (one C++ op for
pre-tokenization and WordPiece), preceded by our own `bert_normalize`.
Measured on the multilingual sample (2 CPU cores, batched tf.data):
FastBertTokenizer ~5 MB/s end to end vs ~1.1 MB/s for `BertTokenizer`
(regex pre-tokenizer); HF `tokenizers` ~1 MB/s. Ids are identical to HF's
BertWordPieceTokenizer on that sample (tests/text/test_hf_parity.py); the
op's built-in lower-casing is NOT used because it applies NFKC (599 of
16,405 lines differed with it).
"""

import os

import tensorflow as tf

from kerasbert.text.families import WORDPIECE
from kerasbert.text.families import SUFFIX_INDICATOR
from kerasbert.text.families import special_ids
from kerasbert.text.families import word_starts
from kerasbert.text.subword_tokenizer import SubwordTokenizer
from kerasbert.text.vocabulary import load_vocab



# BERT's _clean_text drops NUL, U+FFFD and "control" characters (Unicode
# category C*: Cc, Cf (e.g. zero-width non-joiner U+200C), Co) but not tab,
# newline and carriage return, which are whitespace. Cc spelled out as ranges
# so \t \n \r can be left alone.
_CONTROL_RE = r"[\x{0}-\x{8}\x{B}\x{C}\x{E}-\x{1F}\x{7F}-\x{9F}\p{Cf}\p{Co}\x{FFFD}]"

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
    import tensorflow_text as tf_text

    texts = tf.strings.regex_replace(texts, _CONTROL_RE, "")
    # Every space separator (NBSP, ideographic space, ...) is whitespace for
    # BERT; the tensorflow-text op alone would keep NBSP inside a word.
    texts = tf.strings.regex_replace(texts, _SPACE_RE, " ")
    if lower_case:
        texts = tf.strings.lower(texts, encoding="utf-8")
        texts = tf_text.normalize_utf8(texts, "NFD")
        texts = tf.strings.regex_replace(texts, r"\p{Mn}", "")
    return texts


class WordPieceTokenizer(SubwordTokenizer):
    """BERT WordPiece tokenizer (uncased or cased) over a `vocab.txt`.

    Text is normalized as BERT does: control characters dropped, whitespace
    unified, every CJK ideograph split into its own word, punctuation split
    off; with `lower_case=True` also lower case, NFD and accents (combining
    marks) removed (`bert_normalize`). Words longer than
    `max_bytes_per_word` UTF-8 bytes, or that cannot be split into
    vocabulary pieces, become one `[UNK]`. Text like "[MASK]" is text
    ("[", "mask", "]"), as in BERT: user input cannot inject special tokens.

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
        max_bytes_per_word: longer words become `[UNK]`. BERT counts
            characters (HF `tokenizers`: 100, google-research/bert: 200);
            the op counts UTF-8 bytes, so 400 = 100 characters of any script
            (a Thai word of 40 characters is 120 bytes).

    Example:

    >>> tokenizer = WordPieceTokenizer("vocab.txt")
    >>> tokenizer.tokenize_ids(["Hello world!"])    # [1, (3)] int32
    >>> tokenizer.tokenize(["Hello worlds"])        # [1, (2), (1 or 2)]
    """

    family = WORDPIECE  # what `kerasbert.text.families` knows it by

    def __init__(self, vocab_file, lower_case=True, max_bytes_per_word=400, name=None):
        super().__init__(name=name)
        import tensorflow_text as tf_text

        vocab_file = os.fspath(vocab_file)
        self._vocab = load_vocab(vocab_file)
        self._vocab_path = vocab_file
        self.lower_case = bool(lower_case)
        for attr, value in special_ids(WORDPIECE, self._vocab, vocab_file).items():
            setattr(self, attr, value)

        # Tracked, so an exported SavedModel carries assets/<vocab file name>.
        self.vocab_asset = tf.saved_model.Asset(vocab_file)
        self._fast = tf_text.FastBertTokenizer(
            vocab=self._vocab,
            token_out_type=tf.int32,
            unknown_token="[UNK]",
            suffix_indicator=SUFFIX_INDICATOR,
            max_bytes_per_word=max_bytes_per_word,
            # Normalization is ours (bert_normalize); the op then only
            # cleans whitespace, splits words/punctuation/CJK and WordPieces.
            lower_case_nfd_strip_accents=False,
            support_detokenization=True,
        )
        # Word boundaries come back from the pieces: a word starts at every
        # piece that is not a "##" suffix (as whole-word masking in the
        # original create_pretraining_data.py decides it).
        # "##" alone is a normal token (never produced as a suffix piece).
        self._set_vocabulary(self._vocab, word_starts(WORDPIECE, self._vocab))
        self.token_table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                self._tokens, tf.range(len(self._vocab), dtype=tf.int32)
            ),
            default_value=self.unk_id,
        )

    # --- vocabulary ---------------------------------------------------------

    @property
    def vocab_file(self):
        return self._vocab_path

    # --- tokenization -------------------------------------------------------

    def _pieces(self, batch):
        return self._fast.tokenize(bert_normalize(batch, self.lower_case))

    def _join_pieces(self, ids):
        # "##" pieces join their word; words are separated by spaces.
        return self._fast.detokenize(ids)

    @tf.autograph.experimental.do_not_convert
    def tokenize_with_offsets(self, texts):
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
        pieces can share a character.

        Args:
            texts: a string scalar, or a 1-D string tensor/list of B texts.

        Returns:
            (ids, starts, ends): int32 `tf.RaggedTensor`s [B, (pieces)] (or
            dense [pieces] for a scalar input); `starts`/`ends` are int64 code
            point offsets, `ends` exclusive. `ids` equal `tokenize_ids(texts)`
            (normalizing character by character gives the same text).
        """
        return self._with_char_offsets(
            texts, lambda chars: bert_normalize(chars, self.lower_case),
            self._fast.tokenize_with_offsets)
