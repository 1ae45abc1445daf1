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
and pre-tokenizing the rest (the splitting itself:
`kerasbert.text.added_token_splitter`).

The string ops the families share (lower case, NUL handling, regex split,
character offsets through normalization) are `kerasbert.text.string_ops`.
"""

import tensorflow as tf

from kerasbert.text.added_token_splitter import AddedTokenSplitter
from kerasbert.text.special_strings import as_added_tokens
from kerasbert.text.special_strings import match_pattern
from kerasbert.text.special_strings import matched_tokens
from kerasbert.text.string_ops import cut_at_nul


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
        self._splitter = AddedTokenSplitter(keys, ids, single)
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
        """Texts [N] with the matches of `pattern` as one added-token id
        each and the text between them through `inner`: ids [N, (pieces)],
        or (ids, starts, ends) with `offsets` (`AddedTokenSplitter`; a
        family that trims offsets trims a match's span too)."""
        return self._splitter.split_tokenize(
            texts, pattern, inner, offsets=offsets, char_offsets=char_offsets,
            trim_spans=bool(getattr(self, "trim_offsets", False)))

    def _offsets_at_text_start(self, starts, ends):
        """The final offsets [B, (pieces)] with each text's first token's
        span as the family gives it (unchanged here)."""
        return starts, ends

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
            `str`) the piece's text; an added token's span is its content
            with the whitespace its lstrip / rstrip took, as `tokenizers`
            gives it (without it where the family trims offsets).
            `ids` equal `tokenize_ids(texts)`.
        """
        batch, scalar = self._as_batch(texts)
        batch = self._input(batch)
        if getattr(self, "_raw_pattern", None) is None:
            ids, starts, ends = self._text_offsets(batch)
        else:
            ids, starts, ends = self._split_tokenize(batch, self._raw_pattern, self._text_offsets,
                                                     offsets=True, char_offsets=True)
        starts, ends = self._offsets_at_text_start(starts, ends)
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
