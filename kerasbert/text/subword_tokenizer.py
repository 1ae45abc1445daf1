"""`SubwordTokenizer`: what every tokenizer of the zoo shares.

WordPiece (BERT), SentencePiece (ALBERT) and byte-level BPE (RoBERTa) differ
in how text becomes pieces and how pieces map back to characters; the
vocabulary lookups, the batch handling, word grouping and the TF Hub special
ids are the same, and live here once. A subclass sets up its op and calls
`_set_vocabulary` and `_set_added_tokens`, then defines `_text_pieces(batch)`
and `_text_offsets(batch)` (and `_join_pieces`).

Special-token strings (`kerasbert.text.special_strings`) are handled here
once for every family: with `special_tokens_in_strings` (or for non-special
added tokens) each text is split at the matches, the text between them is
tokenized by the family, and each match becomes its one id, as the
`tokenizers` library splits its input at added tokens before normalizing
and pre-tokenizing the rest.
"""

import tensorflow as tf

from kerasbert.text.special_strings import WHITESPACE
from kerasbert.text.special_strings import WORD_CHARACTER
from kerasbert.text.special_strings import as_added_tokens
from kerasbert.text.special_strings import match_pattern
from kerasbert.text.special_strings import matched_tokens


class SubwordTokenizer(tf.Module):
    """Base class: a vocabulary, and text -> int32 pieces in TensorFlow ops.

    Subclasses set the special ids `pad_id`, `unk_id`, `cls_id`, `sep_id`,
    `mask_id` and `lower_case`.
    """

    def _set_vocabulary(self, tokens, word_start):
        """tokens: the vocabulary in id order; word_start: per token, whether
        a piece with that id begins a word (not a "##" suffix; a "▁" or "Ġ"
        piece)."""
        self._vocab = list(tokens)
        self._tokens = tf.constant(self._vocab, tf.string)
        self._word_start_list = [bool(w) for w in word_start]
        self._word_start = tf.constant(self._word_start_list, tf.bool)

    def _set_added_tokens(self, added_tokens, special_tokens_in_strings, source,
                          normalize=None):
        """Which strings of the text become one id each (after
        `_set_vocabulary`).

        Args:
            added_tokens: `AddedToken`s (or their dicts / strings), each
                content a token of the vocabulary.
            special_tokens_in_strings: match the special ones too.
            source: the vocabulary's file, named in errors.
            normalize: for a family that matches `normalized` tokens in its
                normalized text: list of str -> the normalized strings (the
                contents as the text normalization leaves them). None: the
                family has no text normalization of its own before its model
                (byte-level BPE) or none we can reach (SentencePiece's is
                inside its op), and normalized tokens are matched in the raw
                text.

        Raises:
            ValueError: an added token that is not in the vocabulary.
        """
        tokens = as_added_tokens(added_tokens, source)
        index = {}
        for i, token in enumerate(self._vocab):
            index.setdefault(token, i)
        missing = [t.content for t in tokens if t.content not in index]
        if missing:
            raise ValueError(f"{source}: the added token(s) {', '.join(map(repr, missing))} "
                             "are not in the vocabulary.")
        self.added_tokens = tuple(tokens)
        self.special_tokens_in_strings = bool(special_tokens_in_strings)
        matched = matched_tokens(tokens, self.special_tokens_in_strings)
        in_normalized = [t for t in matched if t.normalized and normalize is not None]
        in_raw = [t for t in matched if t not in in_normalized]
        normalized_contents = normalize([t.content for t in in_normalized]) if in_normalized else []
        self._raw_pattern = match_pattern(in_raw)
        self._normalized_pattern = match_pattern(in_normalized, normalized_contents)
        keys = [t.content for t in in_raw] + list(normalized_contents)
        ids = [index[t.content] for t in in_raw + in_normalized]
        single = {index[t.content] for t in matched if t.single_word}
        # Matched strings -> ids by comparison with these constants: a few
        # tokens, and no table (a stateful lookup in a tf.data map function
        # measured half the throughput).
        self._added_keys = tf.constant(keys or [""], tf.string)
        self._added_values = tf.constant(ids or [-1], tf.int32)
        self._single_word_ids = tf.constant(sorted(single) or [-1], tf.int32)
        self._any_single_word = bool(single)
        # An added token is a word of its own, and so is what follows it
        # (HF's word ids: None for it, a new word after it).
        added = set(ids)
        self._added_id = tf.constant([i in added for i in range(len(self._vocab))], tf.bool)
        self._word_start = tf.constant(
            [w or i in added for i, w in enumerate(self._word_start_list)], tf.bool)

    def _text_pieces(self, batch):
        """Text without added-token matches: string [B] -> int32
        `tf.RaggedTensor` [B, (pieces)]."""
        raise NotImplementedError(f"{type(self).__name__} must define _text_pieces().")

    def _text_offsets(self, batch):
        """Text without added-token matches: string [B] -> (ids, starts,
        ends) [B, (pieces)], CHARACTER offsets (`tokenize_with_offsets`)."""
        raise NotImplementedError(f"{type(self).__name__} must define _text_offsets().")

    def _pieces(self, batch):
        """string [B] -> int32 `tf.RaggedTensor` [B, (pieces)]."""
        if getattr(self, "_raw_pattern", None) is None:
            return self._text_pieces(batch)
        return self._split_tokenize(batch, self._raw_pattern, self._text_pieces)

    @tf.autograph.experimental.do_not_convert
    def _split_tokenize(self, texts, pattern, inner, offsets=False, char_offsets=False):
        """Tokenizes `texts` [N] with the matches of `pattern` (added tokens)
        as one id each and the text between them by `inner`.

        Args:
            texts: string [N].
            pattern: `match_pattern` of the tokens to find.
            inner: string [S] -> ids [S, (pieces)], or with `offsets`
                (ids, starts, ends) whose offsets count within each string.
            offsets: also return offsets.
            char_offsets: `inner` counts characters (else UTF-8 bytes);
                offsets into `texts` are returned in the same unit.

        Returns:
            ids [N, (pieces)] int32, or (ids, starts, ends) with int64
            offsets into `texts`; a match's span is its token's content,
            without the whitespace lstrip / rstrip took.
        """
        # Most texts hold no match: one regex pass finds those that do, and
        # only they are split (the split's many small ops cost more than the
        # tokenizer; a batch without a match skips them).
        rows = tf.where(tf.strings.regex_full_match(texts, f"(?s).*(?:{pattern}).*"))[:, 0]
        plain = inner(texts)
        # The split is one function call in the branch: a graph's untaken
        # branch still steps through each of its ops (halving throughput
        # with the split's ops inline).
        split = self._segments_function(pattern, inner, offsets, char_offsets)
        return tf.cond(tf.size(rows) > 0,
                       lambda: replace_rows(plain, rows, split(tf.gather(texts, rows))),
                       lambda: plain)

    def _segments_function(self, pattern, inner, offsets, char_offsets):
        """`_tokenize_segments` as a graph function of the texts [M], made
        once per use (kept outside the module's tracked attributes)."""
        cache = self.__dict__.get("_segment_functions")
        if cache is None:
            cache = {}
            object.__setattr__(self, "_segment_functions", cache)
        key = (pattern, inner.__qualname__, offsets, char_offsets)
        if key not in cache:
            cache[key] = tf.function(
                lambda texts: self._tokenize_segments(texts, pattern, inner, offsets,
                                                      char_offsets),
                input_signature=[tf.TensorSpec([None], tf.string)], autograph=False,
                experimental_attributes={"_noinline": True})
        return cache[key]

    def _tokenize_segments(self, texts, pattern, inner, offsets, char_offsets):
        """`_split_tokenize` of a batch that holds matches."""
        segments, seg_starts, counts, match_ids, lead, trail = self._split_segments(texts, pattern)
        is_match = match_ids >= 0
        text_part = tf.where(is_match, tf.zeros_like(segments), segments)
        one = tf.cast(is_match, tf.int64)
        match_rows = tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(match_ids, is_match), one, validate=False)

        def by_text(per_segment):
            return tf.RaggedTensor.from_row_lengths(per_segment, counts,
                                                    validate=False).merge_dims(1, 2)

        if not offsets:
            return by_text(tf.concat([inner(text_part), match_rows], axis=1))
        ids, starts, ends = inner(text_part)
        seg_ends = seg_starts + tf.cast(tf.strings.length(segments, unit="BYTE"), tf.int64)
        content = tf.stack([seg_starts + lead, seg_ends - trail], axis=-1)
        if char_offsets:
            rows = tf.repeat(tf.range(tf.shape(counts, out_type=tf.int64)[0]), counts)
            seg_starts = byte_to_char(texts, rows, seg_starts)
            content = byte_to_char(texts, tf.repeat(rows, 2), tf.reshape(content, [-1]))
            content = tf.reshape(content, [-1, 2])
        piece_base = tf.gather(seg_starts, ids.value_rowids())
        match_starts = tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(content[:, 0], is_match), one, validate=False)
        match_ends = tf.RaggedTensor.from_row_lengths(
            tf.boolean_mask(content[:, 1], is_match), one, validate=False)
        starts = starts.with_flat_values(starts.flat_values + piece_base)
        ends = ends.with_flat_values(ends.flat_values + piece_base)
        return (by_text(tf.concat([ids, match_rows], axis=1)),
                by_text(tf.concat([starts, match_starts], axis=1)),
                by_text(tf.concat([ends, match_ends], axis=1)))

    def _split_segments(self, texts, pattern):
        """Texts [N] cut at the matches of `pattern`.

        Returns:
            segments (flat strings [S], text and matches in order), their
            byte starts [S] (int64), segments per text [N] (int64), the
            added-token id of each match (-1 for text) [S] int32, and the
            whitespace bytes lstrip / rstrip took before / after a match's
            content [S] (int64).
        """
        parts, starts, _ = regex_split_with_offsets(texts, pattern, pattern)
        segments, starts = parts.flat_values, starts.flat_values
        counts = parts.row_lengths()
        where = tf.where(tf.strings.regex_full_match(segments, pattern))
        matches = tf.gather_nd(segments, where)
        left = tf.strings.regex_replace(matches, f"^[{WHITESPACE}]+", "")
        right = tf.strings.regex_replace(matches, f"[{WHITESPACE}]+$", "")
        both = tf.strings.regex_replace(left, f"[{WHITESPACE}]+$", "")
        size = lambda t: tf.cast(tf.strings.length(t, unit="BYTE"), tf.int64)
        # The content is the match itself, else the match without the
        # whitespace a token's lstrip / rstrip took (a content may itself
        # begin or end with whitespace: the exact form is tried first).
        ids = tf.fill(tf.shape(matches), tf.constant(-1, tf.int32))
        lead = tf.zeros(tf.shape(matches), tf.int64)
        trail = tf.zeros(tf.shape(matches), tf.int64)
        for form, form_lead, form_trail in (
                (matches, 0, 0), (left, size(matches) - size(left), 0),
                (right, 0, size(matches) - size(right)),
                (both, size(matches) - size(left), size(left) - size(both))):
            found = self._added_id_of(form)
            new = (ids < 0) & (found >= 0)
            ids = tf.where(new, found, ids)
            lead = tf.where(new, form_lead + tf.zeros_like(lead), lead)
            trail = tf.where(new, form_trail + tf.zeros_like(trail), trail)
        shape = tf.shape(segments, out_type=tf.int64)
        ids = tf.tensor_scatter_nd_update(tf.fill(shape, tf.constant(-1, tf.int32)), where, ids)
        lead = tf.scatter_nd(where, lead, shape)
        trail = tf.scatter_nd(where, trail, shape)
        if self._any_single_word:
            ids = self._single_word_check(texts, parts, starts, ids, lead, trail)
            segments, starts, counts, ids, lead, trail = _merge_text_segments(
                segments, starts, parts.value_rowids(), counts, ids, lead, trail)
        return segments, starts, counts, ids, lead, trail

    def _added_id_of(self, strings):
        """strings [M] -> the added token id of each, -1 for none."""
        equal = tf.equal(strings[:, None], self._added_keys[None, :])
        found = tf.reduce_any(equal, axis=1)
        index = tf.argmax(tf.cast(equal, tf.int32), axis=1)
        return tf.where(found, tf.gather(self._added_values, index), -1)

    def _single_word_check(self, texts, parts, starts, ids, lead, trail):
        """ids with the matches of `single_word` tokens that touch a word
        character set back to text (-1)."""
        rows = parts.value_rowids()
        text = tf.gather(texts, rows)
        begin = starts + lead
        end = starts + tf.cast(tf.strings.length(parts.flat_values, unit="BYTE"), tf.int64) - trail
        before = tf.strings.substr(text, tf.zeros_like(begin), begin, unit="BYTE")
        after = tf.strings.substr(text, end, tf.fill(tf.shape(end), tf.constant(2**31 - 1, tf.int64)),
                                  unit="BYTE")
        touches = (tf.strings.regex_full_match(before, f"(?s).*{WORD_CHARACTER}")
                   | tf.strings.regex_full_match(after, f"(?s){WORD_CHARACTER}.*"))
        single = tf.reduce_any(tf.equal(ids[:, None], self._single_word_ids[None, :]), axis=1)
        return tf.where(single & touches, -1, ids)

    def _lookup(self, tokens):
        """string tensor (any shape) -> int32 ids, unknown -> unk_id."""
        return self.token_table.lookup(tokens)

    def _join_pieces(self, ids):
        """int32 `tf.RaggedTensor` [B, (pieces)] -> string [B]."""
        raise NotImplementedError(f"{type(self).__name__} must define _join_pieces().")

    # --- vocabulary ---------------------------------------------------------

    @property
    def vocabulary(self):
        """The tokens, in id order (a new list)."""
        return list(self._vocab)

    @property
    def vocabulary_size(self):
        return len(self._vocab)

    def id_to_token(self, ids):
        """int ids (any shape, or a Python int) -> tokens (str for an int)."""
        if isinstance(ids, int):
            return self._vocab[ids]
        return tf.gather(self._tokens, ids)

    def token_to_id(self, tokens):
        """tokens (any shape, or a Python str) -> int32 ids; unknown -> unk_id."""
        if isinstance(tokens, str):
            return self._vocab.index(tokens) if tokens in self._vocab else self.unk_id
        return self._lookup(tf.convert_to_tensor(tokens, tf.string))

    def get_special_tokens_dict(self):
        """TF Hub preprocessor names -> int32 scalars (for exported models);
        no "mask_id" for a vocabulary without one (bytes)."""
        specials = {
            "padding_id": tf.constant(self.pad_id, tf.int32),
            "start_of_sequence_id": tf.constant(self.cls_id, tf.int32),
            "end_of_segment_id": tf.constant(self.sep_id, tf.int32),
            "vocab_size": tf.constant(self.vocabulary_size, tf.int32),
        }
        if self.mask_id is not None:
            specials["mask_id"] = tf.constant(self.mask_id, tf.int32)
        return specials

    # --- tokenization -------------------------------------------------------
    # No tensor-dependent Python control flow below, so AutoGraph is skipped
    # (several times faster to trace in tf.data and graphs).

    @staticmethod
    def _as_batch(texts):
        texts = tf.convert_to_tensor(texts, tf.string)
        rank = texts.shape.rank
        if rank not in (0, 1):
            raise ValueError(
                f"texts must be a scalar string or a 1-D batch, got shape {texts.shape}."
            )
        return (texts[tf.newaxis] if rank == 0 else texts), rank == 0

    @tf.autograph.experimental.do_not_convert
    def _with_char_offsets(self, batch, normalize, tokenize_with_byte_offsets):
        """Pieces of `texts` with CHARACTER offsets into the ORIGINAL text.

        Normalisation (lower-casing, accent stripping) can change byte
        lengths, so every original character is normalised on its own
        (`normalize`: flat string tensor of characters -> same shape), the
        results are joined and tokenized (`tokenize_with_byte_offsets`: [B]
        strings -> ids, start bytes, end bytes, ragged), and each piece's
        byte span is traced back to the original characters.

        Args:
            batch: string [B].

        Returns:
            (ids, starts, ends) [B, (pieces)] as `tokenize_with_offsets`
            documents: int64 code point offsets, `ends` exclusive,
            `text[start:end]` the original text of the piece.
        """
        chars = tf.strings.unicode_split(batch, "UTF-8")  # [B, (chars)]
        normalized = normalize(chars.flat_values)
        nbytes = tf.cast(tf.strings.length(normalized, unit="BYTE"), tf.int64)
        # Byte positions in the concatenation of all normalized texts.
        char_end = tf.cumsum(nbytes)  # [total chars], exclusive end byte
        text_first_char = chars.row_starts()  # [B]
        total_bytes = tf.concat([[0], char_end], 0)
        text_base = tf.gather(total_bytes, text_first_char)  # [B] first byte
        joined = tf.strings.reduce_join(chars.with_flat_values(normalized), axis=1)
        ids, start_bytes, end_bytes = tokenize_with_byte_offsets(joined)
        row_of_piece = ids.value_rowids()
        base = tf.gather(text_base, row_of_piece)
        first_char = tf.gather(text_first_char, row_of_piece)
        start_global = base + tf.cast(start_bytes.flat_values, tf.int64)
        last_global = base + tf.cast(end_bytes.flat_values, tf.int64) - 1
        # The char holding a byte: the first char whose end is past it
        # (characters normalized to nothing are skipped).
        start_char = tf.searchsorted(char_end, start_global, side="right", out_type=tf.int64)
        last_char = tf.searchsorted(char_end, last_global, side="right", out_type=tf.int64)
        starts = start_char - first_char
        # A piece with an empty byte span (one character NFKC-expanded into
        # several SentencePiece pieces) gets an empty span at its start, not
        # a negative one.
        ends = tf.maximum(last_char + 1 - first_char, starts)
        return ids, ids.with_flat_values(starts), ids.with_flat_values(ends)

    def tokenize_ids(self, texts):
        """Text -> piece ids.

        Args:
            texts: a string scalar, or a 1-D string tensor/list of B texts.

        Returns:
            int32 `tf.RaggedTensor` [B, (pieces)], or a dense [pieces] vector
            for a scalar input.
        """
        batch, scalar = self._as_batch(texts)
        pieces = self._pieces(batch)
        return pieces[0] if scalar else pieces

    @tf.autograph.experimental.do_not_convert
    def tokenize(self, texts):
        """Text -> piece ids grouped by word (`starts_word`).

        Args:
            texts: a string scalar, or a 1-D string tensor/list of B texts.

        Returns:
            int32 `tf.RaggedTensor` [B, (words), (pieces)], or
            [(words), (pieces)] for a scalar input. `.merge_dims(-2, -1)`
            gives `tokenize_ids`.
        """
        batch, scalar = self._as_batch(texts)
        pieces = self._pieces(batch)
        flat = pieces.flat_values
        position = tf.range(tf.shape(flat, out_type=tf.int64)[0])
        starts = self.starts_word(pieces).flat_values
        words = tf.RaggedTensor.from_row_starts(
            flat, tf.boolean_mask(position, starts), validate=False
        )
        # Words per text; counting by row id keeps trailing empty texts.
        rows = tf.boolean_mask(pieces.value_rowids(), starts)
        words_per_text = tf.math.unsorted_segment_sum(
            tf.ones_like(rows), rows, num_segments=pieces.nrows()
        )
        result = tf.RaggedTensor.from_row_lengths(words, words_per_text, validate=False)
        return result[0] if scalar else result

    @tf.autograph.experimental.do_not_convert
    def tokenize_with_offsets(self, texts):
        """Text -> piece ids with CHARACTER offsets into the ORIGINAL text
        (each family's `_text_offsets` says how it maps them back).

        Args:
            texts: a string scalar, or a 1-D string tensor/list of B texts.

        Returns:
            (ids, starts, ends): int32 `tf.RaggedTensor`s [B, (pieces)] (or
            dense [pieces] for a scalar input); `starts`/`ends` are int64
            code point offsets, `ends` exclusive, `text[start:end]` (Python
            `str`) the piece's text; an added token's span is its content.
            `ids` equal `tokenize_ids(texts)`.
        """
        batch, scalar = self._as_batch(texts)
        if getattr(self, "_raw_pattern", None) is None:
            ids, starts, ends = self._text_offsets(batch)
        else:
            ids, starts, ends = self._split_tokenize(batch, self._raw_pattern, self._text_offsets,
                                                     offsets=True, char_offsets=True)
        if scalar:
            return ids[0], starts[0], ends[0]
        return ids, starts, ends

    @tf.autograph.experimental.do_not_convert
    def starts_word(self, pieces):
        """Which pieces start a word: the vocabulary's word-initial pieces,
        added tokens and the piece after one, and each text's first piece
        whatever it is (a stray "##x").

        Args:
            pieces: int `tf.RaggedTensor` [B, (pieces)] of ids.

        Returns:
            bool `tf.RaggedTensor` [B, (pieces)].
        """
        flat = pieces.flat_values
        position = tf.range(tf.shape(flat, out_type=tf.int64)[0])
        row_start = tf.gather(pieces.row_starts(), pieces.value_rowids())
        begins = self._begins_word(flat)
        if getattr(self, "_raw_pattern", None) is not None or getattr(
                self, "_normalized_pattern", None) is not None:
            after_added = tf.gather(self._added_id, tf.concat([flat[:1], flat[:-1]], 0))
            begins = begins | after_added
        return pieces.with_flat_values(tf.logical_or(begins, tf.equal(position, row_start)))

    def _begins_word(self, flat):
        """Flat piece ids [N] -> whether each begins a word, by the
        vocabulary (a subclass whose word marks are contextual overrides it)."""
        return tf.gather(self._word_start, flat)

    @tf.autograph.experimental.do_not_convert
    def detokenize(self, ids):
        """Piece ids -> text.

        Args:
            ids: int ids [pieces], [B, (pieces)] or [B, (words), (pieces)]
                (ragged or dense; dense padding ids are dropped).

        Returns:
            A string scalar for [pieces], else a [B] string tensor.
            Normalization (case, accents, spacing) is not undone.
        """
        if isinstance(ids, tf.RaggedTensor):
            if ids.ragged_rank > 1:
                ids = ids.merge_dims(-2, -1)
        else:
            ids = tf.convert_to_tensor(ids)
            if ids.shape.rank == 1:
                return self.detokenize(ids[tf.newaxis])[0]
            ids = tf.RaggedTensor.from_tensor(ids, padding=tf.cast(self.pad_id, ids.dtype))
        return self._join_pieces(tf.cast(ids, tf.int32))


def lower_case(texts):
    """Unicode lower case, character by character, as the `tokenizers`
    library (Rust's `char::to_lowercase`) does it.

    `tf.strings.lower` (ICU) would turn a word-final "Σ" into "ς" (the one
    context rule of the root locale), and lower-casing one character at a
    time (the offset mapping) into "σ": "Σ" becomes "σ" first so that both
    agree. It also stops at a NUL character (a C-string bug): a batch
    holding one is lower-cased between its NULs.

    Args:
        texts: string [N].

    Returns:
        string [N].
    """
    texts = tf.strings.regex_replace(texts, "\u03a3", "\u03c3")

    def between_nuls():
        # Separators given as op attributes are C strings too: the NULs go
        # back as tensor values.
        parts = tf.strings.split(texts, sep="\x00")
        flat = tf.strings.lower(parts.flat_values, encoding="utf-8")
        last = tf.equal(tf.range(tf.size(flat, out_type=tf.int64)) + 1,
                        tf.gather(parts.row_limits(), parts.value_rowids()))
        flat = tf.strings.join([flat, tf.where(last, "", tf.constant("\x00"))])
        return tf.strings.reduce_join(parts.with_flat_values(flat), axis=-1)

    nul = tf.reduce_any(tf.strings.regex_full_match(texts, "(?s).*\\x00.*"))
    return tf.cond(nul, between_nuls, lambda: tf.strings.lower(texts, encoding="utf-8"))


def replace_rows(base, rows, new):
    """`base` with its rows `rows` replaced by those of `new`.

    Args:
        base: `tf.RaggedTensor` [N, ...], or a tuple of them.
        rows: int64 [L], distinct.
        new: `tf.RaggedTensor` [L, ...] (a tuple where `base` is one).

    Returns:
        the same structure as `base`.
    """
    if isinstance(base, tuple):
        return tuple(replace_rows(b, rows, n) for b, n in zip(base, new))
    count = base.nrows()
    index = tf.tensor_scatter_nd_update(tf.range(count), rows[:, None],
                                        count + tf.range(tf.size(rows, out_type=tf.int64)))
    return tf.gather(tf.concat([base, new], axis=0), index)


def byte_to_char(texts, rows, positions):
    """UTF-8 byte positions (at character boundaries) -> code point
    positions.

    Args:
        texts: string [N].
        rows: int64 [K], the text of each position.
        positions: int64 [K], byte offsets into those texts.

    Returns:
        int64 [K].
    """
    _, char_starts = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")
    text_base = tf.cumsum(tf.cast(tf.strings.length(texts, unit="BYTE"), tf.int64), exclusive=True)
    starts = char_starts.flat_values + tf.gather(text_base, char_starts.value_rowids())
    found = tf.searchsorted(starts, tf.gather(text_base, rows) + positions, side="left",
                            out_type=tf.int64)
    return found - tf.gather(char_starts.row_starts(), rows)


def _merge_text_segments(segments, starts, rows, counts, ids, lead, trail):
    """Joins runs of adjacent text segments of one text (a match set back to
    text sits between its neighbours again); same returns as
    `SubwordTokenizer._split_segments`."""
    is_text = ids < 0
    n = tf.shape(segments, out_type=tf.int64)[0]
    same_row = tf.concat([[False], tf.equal(rows[1:], rows[:-1])], 0)
    joins = same_row & is_text & tf.concat([[False], is_text[:-1]], 0)
    new = tf.logical_not(joins)
    group = tf.cumsum(tf.cast(new, tf.int64)) - 1
    groups = tf.reduce_sum(tf.cast(new, tf.int64))
    first = tf.boolean_mask(tf.range(n), new)
    merged = tf.strings.unsorted_segment_join(segments, group, groups)
    new_rows = tf.gather(rows, first)
    new_counts = tf.math.unsorted_segment_sum(tf.ones_like(new_rows), new_rows,
                                              tf.shape(counts, out_type=tf.int64)[0])
    return (merged, tf.gather(starts, first), new_counts, tf.gather(ids, first),
            tf.gather(lead, first), tf.gather(trail, first))


def regex_split_with_offsets(texts, delim_pattern, keep_pattern):
    """`tensorflow_text.regex_split_with_offsets`, also for texts holding
    NUL characters: the op stops reading a text at its first NUL (a C-string
    bug), so the split runs on a copy with NUL as \x01 (one byte for one,
    offsets unchanged; neither is whitespace, a letter or a number) and the
    pieces holding \x01 are cut from the original texts again.

    Args:
        texts: string [N].
        delim_pattern, keep_pattern: RE2 patterns, as the op takes them;
            \x00 and \x01 must play the same part in them.

    Returns:
        (pieces, start bytes, end bytes), `tf.RaggedTensor`s [N, (pieces)].
    """
    import tensorflow_text as tf_text

    safe = tf.strings.regex_replace(texts, r"\x00", "\x01")
    parts, starts, ends = tf_text.regex_split_with_offsets(safe, delim_pattern, keep_pattern)
    flat = parts.flat_values
    redo = tf.where(tf.strings.regex_full_match(flat, "(?s).*\x01.*"))[:, 0]
    rows = tf.gather(parts.value_rowids(), redo)
    begin = tf.gather(starts.flat_values, redo)
    cut = tf.strings.substr(tf.gather(texts, rows), begin,
                            tf.gather(ends.flat_values, redo) - begin, unit="BYTE")
    flat = tf.tensor_scatter_nd_update(flat, redo[:, None], cut)
    return parts.with_flat_values(flat), starts, ends
