"""RoBERTa / GPT-2 byte-level BPE tokenizer in TensorFlow ops.

Reads the released `vocab.json` + `merges.txt` (or ones written by
`kerasbert.text.bpe_training.train_bpe`) and gives the ids of Hugging Face
`tokenizers`' `ByteLevelBPETokenizer` / `RobertaTokenizerFast` (no prefix
space, no normalization), checked in tests/text/test_byte_pair_tokenizer.py
on ASCII, accents, Hangul, CJK and emoji.

Only tensorflow and tensorflow-text ops are used (regex split, string ops,
hash tables, one `tf.while_loop`), so a SavedModel holding it loads with
`import tensorflow_text` alone. keras-hub's `BytePairTokenizer` is not
wrapped: it cannot report offsets, matches special tokens inside user text,
and marks pre-token boundaries with "६" (U+0966, a Devanagari digit that
real text contains).

Steps:
  1. Pre-tokenization, GPT-2's regex
     `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+`.
     RE2 has no look-ahead, so whitespace is matched one character at a
     time and runs are re-joined afterwards (`_group_whitespace`), which
     reproduces `\\s+(?!\\S)` exactly. `\\s` is Unicode White_Space as in
     the Oniguruma regex HF uses (RE2's own `\\s` is ASCII only).
  2. Each pre-token's UTF-8 bytes map to printable characters (GPT-2's
     `bytes_to_unicode`: space -> "Ġ", newline -> "Ċ", ...).
  3. BPE: repeatedly merge, in every word at once, the adjacent pair with
     the lowest rank in merges.txt; all occurrences of that pair in a word,
     non-overlapping from the left (GPT-2's `bpe`), until no pair has a
     rank. Distinct words of a batch are merged once (`tf.unique`), and
     finished words leave the loop.
  4. Pieces -> ids through the vocabulary (unknown -> `<unk>`, which a
     byte-level vocabulary never needs).
"""

import os

import tensorflow as tf

from kerasbert.text.families import BPE
from kerasbert.text.families import load_bpe_vocab
from kerasbert.text.families import WORD_START as _WORD_START
from kerasbert.text.families import special_ids
from kerasbert.text.families import word_starts
from kerasbert.text.special_strings import default_added_tokens
from kerasbert.text.string_ops import regex_split_with_offsets
from kerasbert.text.subword_tokenizer import SubwordTokenizer

WORD_START = _WORD_START[BPE]  # "Ġ": the byte-level form of a leading space.

# Unicode White_Space (Oniguruma's \s with a Unicode encoding).
_WS = (
    r"\t\n\x{B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}"
    r"\x{202F}\x{205F}\x{3000}"
)
# GPT-2's pattern with its two whitespace alternatives replaced by "one
# whitespace character" (runs are re-joined in `_group_whitespace`).
_PRETOKEN_RE = (
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+"
    rf"| ?[^{_WS}\p{{L}}\p{{N}}]+|[{_WS}]"
)
_ONE_WS_RE = rf"[{_WS}]"

NO_RANK = 2**62  # Rank of a pair that is not a merge rule.


def bytes_to_unicode():
    """GPT-2's reversible map from the 256 byte values to printable
    characters: printable Latin-1 bytes map to themselves, the others
    (control characters, space, ...) to U+0100 onwards. Returns a list of
    256 one-character strings indexed by byte value."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("\u00a1"), ord("\u00ac") + 1))
        + list(range(ord("\u00ae"), ord("\u00ff") + 1))
    )
    chars = {}
    extra = 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


class BpeFiles:
    """The vocab.json + merges.txt paths of a BPE tokenizer (byte-level and
    GPT-1's), which `kerasbert.text.tokenizer_loading` copies into a run."""

    @property
    def vocabulary_file(self):
        return self._vocab_path

    @property
    def merges_file(self):
        return self._merges_path

    def _read_files(self, vocabulary_file, merges_file):
        """Reads both files: returns the vocabulary's tokens in id order,
        keeps the paths and the merge rules (`_merges`), and tracks the
        files as assets, so an exported SavedModel carries assets/vocab.json
        and assets/merges.txt next to the graph that uses them.

        Raises:
            FileNotFoundError, ValueError: a missing or malformed file.
        """
        self._vocab_path = os.fspath(vocabulary_file)
        self._merges_path = os.fspath(merges_file)
        tokens = load_bpe_vocab(self._vocab_path)
        self._merges = load_merges(self._merges_path)
        self.vocab_asset = tf.saved_model.Asset(self._vocab_path)
        self.merges_asset = tf.saved_model.Asset(self._merges_path)
        return tokens


def load_merges(path):
    """Reads a `merges.txt` -> list of "a b" rules in rank order (a leading
    "#version" line and blank lines are skipped)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"BPE merges file not found: {path}")
    merges = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\r\n")
            if not line or (number == 1 and line.startswith("#version")):
                continue
            if len(line.split(" ")) != 2:
                raise ValueError(
                    f"{path} line {number}: a merge rule is two tokens "
                    f"separated by one space, got {line!r}."
                )
            merges.append(line)
    return merges


def check_merges(merges, vocabulary, merges_file, vocabulary_file):
    """Raises ValueError unless every rule of `merges` ("a b") makes a
    token of `vocabulary` (a set or {token: id}); the files are named in
    the message."""
    for number, rule in enumerate(merges, 1):
        a, b = rule.split(" ")
        if a + b not in vocabulary:
            raise ValueError(
                f"{merges_file}: merge {number} ({rule!r}) makes "
                f"{a + b!r}, which is not in {vocabulary_file}."
            )


class BytePairTokenizer(BpeFiles, SubwordTokenizer):
    """Byte-level BPE tokenizer (RoBERTa, GPT-2) with the interface of
    `WordPieceTokenizer`.

    Cased, no normalization (`lower_case` is False). Text that looks like a
    special token ("<mask>") is tokenized as text: user input cannot inject
    special tokens, unless `special_tokens_in_strings`
    (`kerasbert.text.special_strings`). A "word" (for `tokenize` and whole-word masking) starts
    at a piece beginning with "Ġ" (a leading space) or at the text start.

    All ops are TensorFlow ops: eager, `tf.data.Dataset.map`, `tf.function`
    and SavedModels (a `tf.Module`; vocab.json and merges.txt are tracked
    assets, the lookup tables tracked resources).

    Args:
        vocabulary_file: path of a `vocab.json` ({token: id}).
        merges_file: path of a `merges.txt` (one "a b" rule per line, in
            merge order).
        trim_offsets: `tokenize_with_offsets` leaves leading/trailing spaces
            ("Ġ") out of a piece's span, as `RobertaTokenizerFast` does
            (trim_offsets=True), so an answer span has no leading space.
        offsets_prefix_space: with `trim_offsets`, the first token of a
            text keeps one leading space (or one whitespace character an
            lstrip added token took) in its span, as `tokenizers`' ByteLevel
            / RobertaProcessing post-processor with add_prefix_space does
            (" hello" spans 0-6); default False, RoBERTa's own (1-6).
        special_tokens_in_strings: match the special tokens in text, as the
            `tokenizers` library does (default False: text is text).
        added_tokens: the `AddedToken`s the source registers (a
            tokenizer.json's added_tokens); None: <s> <pad> </s> <unk>
            <mask> (<mask> with lstrip), as transformers' RobertaTokenizer
            registers them.
        truncate_at_nul: drop the text after a NUL character, as keras-hub's
            byte-level BPE does (its tensorflow-text regex split reads C
            strings): on, a keras-hub preset's ids are keras-hub's; default
            False: no text is dropped.

    Example:

    >>> import os, tempfile
    >>> from kerasbert.text import BytePairTokenizer, train_bpe
    >>> folder = tempfile.mkdtemp()
    >>> corpus = os.path.join(folder, "corpus.txt")
    >>> with open(corpus, "w") as f:
    ...     _ = f.write("hello world\\nhello there world\\n" * 3)
    >>> files = train_bpe(corpus, 270, folder)      # vocab.json, merges.txt
    >>> tokenizer = BytePairTokenizer(files["vocabulary_file"], files["merges_file"])
    >>> ids = tokenizer.tokenize_ids(["hello world!"])  # [B, (pieces)] int32
    >>> ids.shape.as_list()
    [1, None]
    >>> tokenizer.detokenize(ids).numpy()
    array([b'hello world!'], dtype=object)
    """

    family = BPE  # what `kerasbert.text.families` knows it by

    lower_case = False

    def __init__(self, vocabulary_file, merges_file, trim_offsets=True,
                 special_tokens_in_strings=False, added_tokens=None, truncate_at_nul=False,
                 offsets_prefix_space=False, name=None):
        super().__init__(name=name)
        self._vocab = self._read_files(vocabulary_file, merges_file)
        vocabulary_file, merges_file = self._vocab_path, self._merges_path
        self.trim_offsets = bool(trim_offsets)
        self.offsets_prefix_space = bool(offsets_prefix_space)
        self.truncate_at_nul = bool(truncate_at_nul)
        for attr, value in special_ids(self.family, self._vocab, vocabulary_file).items():
            setattr(self, attr, value)
        check_merges(self._merges, set(self._vocab), merges_file, vocabulary_file)

        byte_chars = bytes_to_unicode()
        self._set_vocabulary(self._vocab, word_starts(self.family, self._vocab))
        self.token_table = lookup_table(self._tokens, tf.range(len(self._vocab)), self.unk_id)
        self.merge_table = merge_rank_table(self._merges)
        byte_strings = tf.constant([bytes([b]) for b in range(256)], tf.string)
        self.byte_to_char = lookup_table(byte_strings, tf.constant(byte_chars), "", dtype=tf.string)
        self.char_to_byte = lookup_table(tf.constant(byte_chars), byte_strings, "", dtype=tf.string)
        # No normalizer: a `normalized` added token is matched in the raw
        # text (a subclass with one matches it in its normalized text).
        self._set_added_tokens(
            default_added_tokens(self.family, self._vocab) if added_tokens is None
            else added_tokens, special_tokens_in_strings, vocabulary_file,
            normalize=self._normalize_strings)

    #: str list -> their normalized forms, or None: no normalizer (RoBERTa).
    _normalize_strings = None

    # --- the pipeline -------------------------------------------------------
    # No tensor-dependent Python control flow below: AutoGraph is skipped
    # (faster tracing in tf.data and graphs); the BPE loop is tf.while_loop.

    @tf.autograph.experimental.do_not_convert
    def _pretokenize(self, batch):
        """[B] texts -> pre-tokens (flat strings [W]), their byte starts
        [W] and the number of pre-tokens per text [B] (int64)."""
        # NUL-safe: a NUL is a symbol like \x01 to GPT-2's pattern.
        parts, starts, _ = regex_split_with_offsets(batch, _PRETOKEN_RE, _PRETOKEN_RE)
        words, word_starts, group_rows = _group_whitespace(parts, starts)
        counts = _count(group_rows, tf.shape(batch, out_type=tf.int64)[0])
        return words, word_starts, counts

    # A graph function even when called eagerly: the merge loop has many
    # small steps, ~10x slower op by op.
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def _merge_words(self, words):
        """Distinct words [U] -> (pieces [S], word of each piece [S])."""
        chars = self.byte_to_char.lookup(tf.strings.bytes_split(words))
        num_words = tf.shape(words, out_type=tf.int64)[0]
        return apply_merges(chars.flat_values, chars.value_rowids(), num_words, self.merge_table)

    @tf.autograph.experimental.do_not_convert
    def _encode_words(self, words):
        """Flat pre-tokens [W] -> (ids [W, (pieces)] int32 ragged, piece
        byte lengths, same shape, int64). Each distinct word is merged once."""
        unique, index = tf.unique(words)
        num_words = tf.shape(unique, out_type=tf.int64)[0]
        symbols, rows = self._merge_words(unique)
        ids = self.token_table.lookup(symbols)
        lengths = tf.strings.length(symbols, unit="UTF8_CHAR")
        per_unique = tf.RaggedTensor.from_value_rowids(
            tf.stack([ids, tf.cast(lengths, tf.int32)], axis=-1),
            rows,
            nrows=num_words,
            validate=False,
        )
        pieces = tf.gather(per_unique, index)
        return pieces[..., 0], tf.cast(pieces[..., 1], tf.int64)

    @tf.autograph.experimental.do_not_convert
    def _encode(self, batch):
        """[B] -> ids [B, (pieces)], piece byte starts and lengths (int64)."""
        words, word_starts, counts = self._pretokenize(batch)
        ids, lengths = self._encode_words(words)
        # A piece starts where its word does, plus the bytes of the pieces
        # before it in that word.
        within = tf.cumsum(lengths.flat_values, exclusive=True)
        within -= tf.gather(tf.gather(within, lengths.row_starts()), lengths.value_rowids())
        starts = tf.gather(word_starts, lengths.value_rowids()) + within
        by_text = lambda r: tf.RaggedTensor.from_row_lengths(r, counts, validate=False).merge_dims(1, 2)
        return (
            by_text(ids),
            by_text(lengths.with_flat_values(starts)),
            by_text(lengths),
        )

    # --- tokenization -------------------------------------------------------

    def _text_pieces(self, batch):
        ids, _, _ = self._encode(batch)
        return ids

    def _join_pieces(self, ids):
        # The bytes the pieces stand for; special tokens appear as their strings.
        tokens = tf.gather(self._tokens, ids)
        chars = tf.strings.unicode_split(tokens.flat_values, "UTF-8")
        raw = tf.strings.reduce_join(self.char_to_byte.lookup(chars), axis=-1)
        return tf.strings.reduce_join(tokens.with_flat_values(raw), axis=-1)

    @tf.autograph.experimental.do_not_convert
    def _text_offsets(self, batch):
        """Text -> BPE ids with CODE-POINT offsets into the original text.

        A piece that covers only some bytes of a character (an emoji split
        into byte pieces) maps to that whole character, so neighbouring
        pieces can share one. With `trim_offsets` (the default) leading and
        trailing spaces are left out of the span, as in
        `RobertaTokenizerFast`; a piece of spaces only gets an empty span.

        Args:
            batch: string [B].

        Returns:
            (ids, starts, ends): int32 ids and int64 offsets, `tf.RaggedTensor`s
            [B, (pieces)]; `ends` are exclusive and `text[start:end]`
            (Python `str`) is the piece's text.
        """
        ids, start_bytes, lengths = self._encode(batch)
        start_bytes, lengths = start_bytes.flat_values, lengths.flat_values
        end_bytes = start_bytes + lengths
        if self.trim_offsets:
            pieces = tf.gather(self._tokens, ids.flat_values)
            chars = tf.strings.length(pieces, unit="UTF8_CHAR")
            lead = chars - tf.strings.length(
                tf.strings.regex_replace(pieces, f"^{WORD_START}+", ""), unit="UTF8_CHAR"
            )
            trail = chars - tf.strings.length(
                tf.strings.regex_replace(pieces, f"{WORD_START}+$", ""), unit="UTF8_CHAR"
            )
            start_bytes = tf.minimum(start_bytes + tf.cast(lead, tf.int64), end_bytes)
            end_bytes = tf.maximum(end_bytes - tf.cast(trail, tf.int64), start_bytes)
        # Byte -> character: the start byte of every character of every
        # text, made global (text i's bytes follow text i - 1's) so one
        # sorted array serves the whole batch.
        _, char_starts = tf.strings.unicode_decode_with_offsets(batch, "UTF-8")
        text_bytes = tf.strings.length(batch, unit="BYTE")
        text_base = tf.cumsum(tf.cast(text_bytes, tf.int64), exclusive=True)
        global_starts = char_starts.flat_values + tf.gather(text_base, char_starts.value_rowids())
        row = ids.value_rowids()
        base = tf.gather(text_base, row)
        first_char = tf.gather(char_starts.row_starts(), row)
        start_char = tf.searchsorted(global_starts, base + start_bytes, side="right", out_type=tf.int64) - 1
        end_char = tf.searchsorted(global_starts, base + end_bytes - 1, side="right", out_type=tf.int64)
        # An empty (trimmed) span sits at a character boundary: that of its
        # end, which is also right at the end of the text.
        start_char = tf.where(start_bytes < end_bytes, start_char, end_char)
        starts = ids.with_flat_values(start_char - first_char)
        ends = ids.with_flat_values(end_char - first_char)
        return ids, starts, ends


    def _offsets_at_text_start(self, starts, ends):
        """`tokenizers`' add_prefix_space rule of trimming: a token whose
        span starts the text and had exactly one leading space trimmed
        keeps it (start 1 -> 0; a lone space's (1, 1) -> (0, 0)): a text's first token."""
        if not (self.trim_offsets and self.offsets_prefix_space):
            return starts, ends
        s, e = starts.flat_values, ends.flat_values
        rows = starts.value_rowids()
        first = tf.equal(tf.range(tf.size(s, out_type=tf.int64)),
                         tf.gather(starts.row_starts(), rows))
        keep = tf.logical_and(first, tf.equal(s, 1))
        s = tf.where(keep, tf.zeros_like(s), s)
        e = tf.where(tf.logical_and(keep, tf.equal(e, 1)), tf.zeros_like(e), e)
        return starts.with_flat_values(s), ends.with_flat_values(e)


def _count(rows, num_rows):
    """How many times each of 0..num_rows-1 occurs in `rows` (int64)."""
    return tf.math.unsorted_segment_sum(tf.ones_like(rows), rows, num_rows)


def lookup_table(keys, values, default, dtype=tf.int32):
    return tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(keys, tf.cast(values, dtype)),
        default_value=tf.constant(default, dtype),
    )


def merge_rank_table(merges):
    """"a b" rule -> its rank (int64; `NO_RANK` for any other pair)."""
    # Without merges the table still needs a key: " " is no pair of two
    # non-empty symbols.
    return lookup_table(tf.constant(merges or [" "], tf.string),
                        tf.range(len(merges)) if merges else [NO_RANK], NO_RANK, dtype=tf.int64)


def _group_whitespace(parts, starts):
    """Re-joins the one-character whitespace pre-tokens of
    `_PRETOKEN_RE` into GPT-2's `\\s+(?!\\S)|\\s+` tokens.

    A run of whitespace W before a word is W[:-1] then W[-1]: the last
    character either joined the word (" word", matched by ` ?\\p{L}+` etc.)
    or, when it is not a space ("\\n"), stands alone. A run at the end of
    the text is one token.

    Args:
        parts: string RaggedTensor [B, (parts)] from the regex split.
        starts: int64 byte starts, same shape.

    Returns:
        (words [W], word byte starts [W], text index of each word [W]).
    """
    flat = parts.flat_values
    rows = parts.value_rowids()
    n = tf.shape(flat, out_type=tf.int64)[0]
    is_ws = tf.strings.regex_full_match(flat, _ONE_WS_RE)
    same_row_as_next = tf.concat([tf.equal(rows[1:], rows[:-1]), [False]], 0)
    prev_ws = tf.concat([[False], tf.logical_and(is_ws[:-1], same_row_as_next[:-1])], 0)
    next_is_word = tf.logical_and(
        same_row_as_next, tf.concat([tf.logical_not(is_ws[1:]), [False]], 0)
    )
    next_has_space = tf.concat(
        [tf.strings.regex_full_match(flat[1:], " .*"), [False]], 0
    )
    # The last whitespace character of a run, standing alone before a word.
    alone_last = is_ws & next_is_word & tf.logical_not(next_has_space)
    new_group = tf.logical_not(is_ws & prev_ws) | alone_last
    group = tf.cumsum(tf.cast(new_group, tf.int64)) - 1
    num_groups = tf.reduce_sum(tf.cast(new_group, tf.int64))
    words = tf.strings.unsorted_segment_join(flat, group, num_groups)
    first = tf.boolean_mask(tf.range(n), new_group)
    return words, tf.gather(starts.flat_values, first), tf.gather(rows, first)


def apply_merges(symbols, rows, num_rows, merge_table):
    """Byte-pair merging of many words at once.

    Each step merges, in every word still in the loop, all occurrences of
    its lowest-ranked pair; a word with nothing left to merge leaves the
    loop, so a step costs the symbols of the unfinished words only (one
    long word does not make every step walk the whole batch).

    Args:
        symbols: flat string [S], the byte-characters of all words.
        rows: int64 [S], the word of each symbol (sorted).
        num_rows: int64 scalar, the number of words.
        merge_table: "a b" -> rank.

    Returns:
        (pieces [S'], rows [S']) after every merge, sorted by word.
    """

    def step(symbols, rows, done_symbols, done_rows):
        n = tf.shape(symbols, out_type=tf.int64)[0]
        pos = tf.range(n - 1)
        pair_rows = rows[:-1]
        ranks = merge_table.lookup(
            tf.strings.join([symbols[:-1], symbols[1:]], separator=" ")
        )
        ranks = tf.where(tf.equal(rows[1:], pair_rows), ranks, NO_RANK)
        best = tf.math.unsorted_segment_min(ranks, pair_rows, num_rows)
        candidate = tf.logical_and(
            tf.equal(ranks, tf.gather(best, pair_rows)), ranks < NO_RANK
        )
        # All occurrences of the best pair are merged, non-overlapping from
        # the left: in a run of adjacent candidates ("a a a"), every other
        # one starting with the first (GPT-2's `bpe`).
        run = tf.cumsum(tf.cast(tf.logical_not(candidate), tf.int64))
        run_first = tf.math.unsorted_segment_min(
            tf.where(candidate, pos, n), run, tf.reduce_max(tf.concat([run, [0]], 0)) + 1
        )
        take = candidate & tf.equal((pos - tf.gather(run_first, run)) % 2, 0)
        merged = tf.where(take, tf.strings.join([symbols[:-1], symbols[1:]]), symbols[:-1])
        merged = tf.concat([merged, symbols[-1:]], 0)
        keep = tf.logical_not(tf.concat([[False], take], 0))
        symbols, rows = tf.boolean_mask(merged, keep), tf.boolean_mask(rows, keep)
        # Words where nothing merged are finished.
        merging = tf.math.unsorted_segment_max(tf.cast(take, tf.int32), pair_rows, num_rows) > 0
        active = tf.gather(merging, rows)
        finished = tf.logical_not(active)
        return (
            tf.boolean_mask(symbols, active),
            tf.boolean_mask(rows, active),
            tf.concat([done_symbols, tf.boolean_mask(symbols, finished)], 0),
            tf.concat([done_rows, tf.boolean_mask(rows, finished)], 0),
        )

    def cond(symbols, rows, done_symbols, done_rows):
        return tf.size(symbols) > 0

    _, _, symbols, rows = tf.while_loop(
        cond,
        step,
        (symbols, rows, tf.zeros([0], tf.string), tf.zeros([0], tf.int64)),
        shape_invariants=(tf.TensorShape([None]),) * 4,
    )
    # Words leave the loop in any order, each in one piece: a stable sort
    # by word restores the order of words and keeps that of pieces.
    order = tf.argsort(rows, stable=True)
    return tf.gather(symbols, order), tf.gather(rows, order)
