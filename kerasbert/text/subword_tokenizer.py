"""`SubwordTokenizer`: what every tokenizer of the zoo shares.

WordPiece (BERT), SentencePiece (ALBERT) and byte-level BPE (RoBERTa) differ
in how text becomes pieces and how pieces map back to characters; the
vocabulary lookups, the batch handling, word grouping and the TF Hub special
ids are the same, and live here once. A subclass sets up its op and calls
`_set_vocabulary` and `_set_added_tokens`, then defines `_text_pieces(batch)`
and `_text_offsets(batch)` (and `_join_pieces`).

`truncate_at_nul` (off by default) drops the text after a NUL character
before anything else, as keras-hub's byte-level BPE does (its
tensorflow-text regex split reads C strings): on, a keras-hub preset's ids
are keras-hub's on every text; off, no text is dropped.

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
    `mask_id` and `lower_case`, and `truncate_at_nul` where they take it.
    """

    #: Drop the text after a NUL character (keras-hub's byte-level BPE).
    truncate_at_nul = False

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

    def _input(self, batch):
        """The texts the tokenizer reads: with `truncate_at_nul`, each cut
        at its first NUL character (offsets into the cut text are offsets
        into the original)."""
        return cut_at_nul(batch) if self.truncate_at_nul else batch

    def _pieces(self, batch):
        """string [B] -> int32 `tf.RaggedTensor` [B, (pieces)]."""
        batch = self._input(batch)
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
        # Only the texts holding a match are cut (cutting takes many small
        # ops), and most batches hold none: one search over the batch joined
        # (a match in a text is one there) skips the cutting and the
        # assembling. The text segments are tokenized in the same call as
        # the batch, so the graph holds one copy of the tokenizer (a tf.data
        # iterator optimizes its map function's graph anew, at about half a
        # millisecond a node).
        search = f"(?s).*(?:{pattern}).*"
        any_match = tf.strings.regex_full_match(tf.strings.reduce_join(texts, separator="\n"),
                                                search)

        def cut():
            rows = tf.where(tf.strings.regex_full_match(texts, search))[:, 0]
            matched = tf.gather(texts, rows)
            return (rows, matched) + tuple(self._split_segments(matched, pattern))

        def nothing():
            return tuple(tf.zeros([0], dtype) for dtype in (
                tf.int64, tf.string, tf.string, tf.int64, tf.int64, tf.int32, tf.int64, tf.int64))

        rows, matched, segments, seg_starts, counts, match_ids, lead, trail = tf.cond(
            any_match, cut, nothing)
        is_match = match_ids >= 0
        text_part = tf.where(is_match, tf.zeros_like(segments), segments)
        out = inner(tf.concat([texts, text_part], 0))
        out = out if offsets else (out,)
        assembled = lambda: self._assemble(texts, out, rows, matched, segments, seg_starts,
                                           counts, match_ids, lead, trail, char_offsets)
        # Without a match, `out` holds the batch's rows alone.
        return tf.cond(any_match, assembled, lambda: out if offsets else out[0])

    @staticmethod
    def _assemble(texts, out, rows, matched, segments, seg_starts, counts, match_ids, lead,
                  trail, char_offsets):
        """`_split_tokenize`'s result from `out`, the tokenized rows of the
        batch [N] and then of the text segments [S] of the matched texts
        (`_split_segments`' results): ids [N, (pieces)], or (ids, starts,
        ends) where `out` holds offsets."""
        is_match = match_ids >= 0
        offsets = len(out) == 3
        # Flat arithmetic (ragged slicing, concatenation and merging cost a
        # hundred graph nodes each). Rows [0, N) of `out` are the batch's
        # texts, rows [N, N + S) the text segments; the sources are the
        # values of `out`, then one per segment (a match's). An output row
        # is a run of chunks of sources: a plain text's pieces, or each of a
        # matched text's segments (its pieces, or its match).
        splits = out[0].row_splits
        n = tf.size(texts, out_type=tf.int64)
        seg_first = splits[n:-1]
        seg_pieces = splits[n + 1:] - seg_first
        seg_count = tf.size(seg_first, out_type=tf.int64)
        # (a dummy last entry: a batch whose joined text matched across two
        # texts has no segment)
        seg_start = tf.concat([tf.where(is_match, splits[-1] + tf.range(seg_count), seg_first),
                               [0]], 0)
        seg_length = tf.concat([tf.where(is_match, tf.ones_like(seg_pieces), seg_pieces), [0]], 0)
        chunks = tf.tensor_scatter_nd_update(tf.ones([n], tf.int64), rows[:, None], counts)
        chunk_row = row_ids(tf.concat([[0], tf.cumsum(chunks)], 0))
        is_segment = tf.gather(tf.scatter_nd(rows[:, None], tf.ones_like(rows), n[None]) > 0,
                               chunk_row)
        segment = tf.maximum(tf.cumsum(tf.cast(is_segment, tf.int64)) - 1, 0)
        chunk_start = tf.where(is_segment, tf.gather(seg_start, segment),
                               tf.gather(splits, chunk_row))
        chunk_length = tf.where(is_segment, tf.gather(seg_length, segment),
                                tf.gather(splits[1:] - splits[:-1], chunk_row))
        out_splits = tf.concat([[0], tf.cumsum(tf.math.unsorted_segment_sum(
            chunk_length, chunk_row, n))], 0)
        _, source = tf.raw_ops.RaggedRange(starts=chunk_start, limits=chunk_start + chunk_length,
                                           deltas=tf.constant(1, tf.int64), Tsplits=tf.int64)

        def assemble(values, per_segment):
            flat = tf.gather(tf.concat([values, per_segment], 0), source)
            return tf.RaggedTensor.from_row_splits(flat, out_splits, validate=False)

        if not offsets:
            return assemble(out[0].flat_values, match_ids)
        seg_ends = seg_starts + tf.cast(tf.strings.length(segments, unit="BYTE"), tf.int64)
        content = tf.stack([seg_starts + lead, seg_ends - trail], axis=-1)
        if char_offsets:
            text_of = tf.repeat(tf.range(tf.shape(counts, out_type=tf.int64)[0]), counts)
            seg_starts = byte_to_char(matched, text_of, seg_starts)
            content = byte_to_char(matched, tf.repeat(text_of, 2), tf.reshape(content, [-1]))
            content = tf.reshape(content, [-1, 2])
        # A segment's pieces count from the segment's start.
        base = tf.concat([tf.zeros([splits[n]], tf.int64),
                          tf.gather(seg_starts, row_ids(splits[n:] - splits[n]))], 0)
        return (assemble(out[0].flat_values, match_ids),
                assemble(out[1].flat_values + base, content[:, 0]),
                assemble(out[2].flat_values + base, content[:, 1]))

    def _split_segments(self, texts, pattern):
        """Texts [N] cut at the matches of `pattern`.

        Returns:
            segments (flat strings [S], text and matches in order), their
            byte starts [S] (int64), segments per text [N] (int64), the
            added-token id of each match (-1 for text) [S] int32, and the
            whitespace bytes lstrip / rstrip took before / after a match's
            content [S] (int64).
        """
        parts, starts, _ = regex_split_with_offsets(texts, pattern, pattern, check=False)
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
        forms = tf.stack([matches, left, right, both], axis=1)  # [M, 4]
        equal = tf.equal(forms[:, :, None], self._added_keys[None, None, :])  # [M, 4, K]
        hit = tf.reduce_any(equal, axis=2)
        form = tf.argmax(tf.cast(hit, tf.int32), axis=1, output_type=tf.int32)  # first hit
        key = tf.argmax(tf.cast(tf.gather(equal, form, batch_dims=1), tf.int32), axis=1)
        ids = tf.where(tf.reduce_any(hit, axis=1), tf.gather(self._added_values, key), -1)
        # lstrip took the whitespace before the content in forms 1 and 3
        # (left, both); rstrip that after it in forms 2 and 3 (right, both).
        lead = tf.where((form == 1) | (form == 3), size(matches) - size(left), 0)
        trail = tf.where(form == 2, size(matches) - size(right),
                         tf.where(form == 3, size(left) - size(both), 0))
        shape = tf.shape(segments, out_type=tf.int64)
        ids = tf.tensor_scatter_nd_update(tf.fill(shape, tf.constant(-1, tf.int32)), where, ids)
        lead = tf.scatter_nd(where, lead, shape)
        trail = tf.scatter_nd(where, trail, shape)
        if self._any_single_word:
            ids = self._single_word_check(texts, parts, starts, ids, lead, trail)
            segments, starts, counts, ids, lead, trail = _merge_text_segments(
                segments, starts, parts.value_rowids(), counts, ids, lead, trail)
        return segments, starts, counts, ids, lead, trail

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
        batch = self._input(batch)
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


#: A text of printable ASCII, tab, newline and carriage return only: what
#: every normalization of the zoo leaves alone but for ASCII lower-casing
#: (no control or format character, no space separator, no capital sigma,
#: nothing NFD changes, no combining mark).
PLAIN_ASCII = r"[\t\n\r\x20-\x7e]*"


def by_rows(texts, plain, other):
    """`texts` with its plain-ASCII rows (`PLAIN_ASCII`) through `plain` and
    the others through `other`, in their order: the cheap path for most
    text of most corpora, the full one where it changes something. Both
    functions map string [M] -> string [M].

    Args:
        texts: string tensor, any shape.

    Returns:
        string tensor, same shape.
    """
    flat = tf.reshape(texts, [-1])
    is_plain = tf.cast(tf.strings.regex_full_match(flat, PLAIN_ASCII), tf.int32)
    other_rows, plain_rows = tf.dynamic_partition(flat, is_plain, 2)
    positions = tf.dynamic_partition(tf.range(tf.size(flat)), is_plain, 2)
    out = tf.dynamic_stitch(positions, [other(other_rows), plain(plain_rows)])
    return tf.reshape(out, tf.shape(texts))


def lower_case(texts, nul_free=False):
    """Unicode lower case, character by character, as the `tokenizers`
    library (Rust's `char::to_lowercase`) does it.

    `tf.strings.lower` (ICU) would turn a word-final "Σ" into "ς" (the one
    context rule of the root locale), and lower-casing one character at a
    time (the offset mapping) into "σ": "Σ" becomes "σ" first so that both
    agree. It also stops at a NUL character (a C-string bug): a batch
    holding one is lower-cased between its NULs. Plain-ASCII texts
    (`PLAIN_ASCII`, most of most corpora) skip both steps.

    Args:
        texts: string [N].
        nul_free: the texts hold no NUL (BERT's normalization removed it):
            no NUL check.

    Returns:
        string [N].
    """
    return by_rows(texts, tf.strings.lower, lambda rows: lower_case_unicode(rows, nul_free))


def lower_case_unicode(texts, nul_free=False):
    """`lower_case` without the plain-ASCII shortcut (for texts known to
    need the full path)."""
    texts = tf.strings.regex_replace(texts, "\u03a3", "\u03c3")
    if nul_free:
        return tf.strings.lower(texts, encoding="utf-8")

    def between_nuls():
        # Separators given as op attributes are C strings too: the NULs go
        # back as tensor values. The op's own outputs, no ragged tensor (few
        # graph nodes: a tf.data iterator optimizes them anew).
        indices, parts, _ = tf.raw_ops.StringSplitV2(input=texts, sep=tf.constant("\x00"))
        rows = indices[:, 0]
        last = tf.not_equal(rows, tf.concat([rows[1:], [-1]], 0))
        parts = tf.strings.join([tf.strings.lower(parts, encoding="utf-8"),
                                 tf.where(last, "", tf.constant("\x00"))])
        return tf.strings.unsorted_segment_join(parts, rows, tf.size(texts, out_type=tf.int64))

    nul = tf.reduce_any(tf.strings.regex_full_match(texts, "(?s).*\\x00.*"))
    return tf.cond(nul, between_nuls, lambda: tf.strings.lower(texts, encoding="utf-8"))


def cut_at_nul(texts):
    """Each text up to its first NUL character (string [N] -> [N]).

    The pattern spells NUL as an escape: an op attribute is a C string."""
    return tf.strings.regex_replace(texts, r"(?s)\x00.*", "")


def row_ids(splits):
    """Row splits [R + 1] -> the row of each value [splits[-1]] (int64),
    in four graph nodes (`RaggedTensor.value_rowids` takes some seventy)."""
    values = tf.range(splits[-1])
    # tf.searchsorted's own reshaping is most of its graph: the op itself.
    return tf.raw_ops.UpperBound(sorted_inputs=splits[None], values=values[None],
                                 out_type=tf.int64)[0] - 1


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


def regex_split_op(texts, delim_pattern, keep_pattern):
    """tensorflow-text's RegexSplitWithOffsets op, its ragged results built
    unchecked (tensorflow-text's wrapper checks the op's row splits with
    some hundred graph nodes, which every tf.data iterator optimizes anew).
    Reads each text up to its first NUL, as the op does
    (`regex_split_with_offsets` reads past it).

    Args:
        texts: string [N].
        delim_pattern, keep_pattern: RE2 patterns, as the wrapper takes them.

    Returns:
        (pieces, start bytes, end bytes), `tf.RaggedTensor`s [N, (pieces)].
    """
    from tensorflow_text.python.ops.regex_split_ops import gen_regex_split_ops

    pieces, starts, ends, splits = gen_regex_split_ops.regex_split_with_offsets(
        texts, f"({delim_pattern})", f"({keep_pattern})")
    return tuple(tf.RaggedTensor.from_row_splits(values, splits, validate=False)
                 for values in (pieces, starts, ends))


def regex_split_with_offsets(texts, delim_pattern, keep_pattern, check=True):
    """`tensorflow_text.regex_split_with_offsets`, also for texts holding
    NUL characters: the op stops reading a text at its first NUL (a C-string
    bug), so a batch holding one is split as a copy with NUL as \x01 (one
    byte for one, offsets unchanged; neither is whitespace, a letter or a
    number) and the pieces holding \x01 are cut from the original texts
    again.

    Args:
        texts: string [N].
        delim_pattern, keep_pattern: RE2 patterns, as the op takes them;
            \x00 and \x01 must play the same part in them.
        check: look for a NUL first, and split a batch without one with
            the op alone (False: always the detour; fewer graph nodes, for
            the few texts that hold a special-token string).

    Returns:
        (pieces, start bytes, end bytes), `tf.RaggedTensor`s [N, (pieces)].
    """
    def nul_safe():
        safe = tf.strings.regex_replace(texts, r"\x00", "\x01")
        parts, starts, ends = regex_split_op(safe, delim_pattern, keep_pattern)
        flat = parts.flat_values
        redo = tf.where(tf.strings.regex_full_match(flat, "(?s).*\x01.*"))[:, 0]
        rows = tf.gather(row_ids(parts.row_splits), redo)
        begin = tf.gather(starts.flat_values, redo)
        cut = tf.strings.substr(tf.gather(texts, rows), begin,
                                tf.gather(ends.flat_values, redo) - begin, unit="BYTE")
        flat = tf.tensor_scatter_nd_update(flat, redo[:, None], cut)
        return parts.with_flat_values(flat), starts, ends

    # Most batches hold no NUL: they take the op alone (the detour costs a
    # pass over every piece).
    if not check:
        return nul_safe()
    nul = tf.reduce_any(tf.strings.regex_full_match(texts, r"(?s).*\x00.*"))
    return tf.cond(nul, nul_safe, lambda: regex_split_op(texts, delim_pattern, keep_pattern))
