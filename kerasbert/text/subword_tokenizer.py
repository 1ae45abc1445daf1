"""`SubwordTokenizer`: what every tokenizer of the zoo shares.

WordPiece (BERT), SentencePiece (ALBERT) and byte-level BPE (RoBERTa) differ
in how text becomes pieces and how pieces map back to characters; the
vocabulary lookups, the batch handling, word grouping and the TF Hub special
ids are the same, and live here once. A subclass sets up its op and calls
`_set_vocabulary`, then defines `_pieces(batch)` (and `token_to_id`,
`detokenize`, `tokenize_with_offsets`).
"""

import tensorflow as tf


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
        self._word_start = tf.constant([bool(w) for w in word_start], tf.bool)

    def _pieces(self, batch):
        """string [B] -> int32 `tf.RaggedTensor` [B, (pieces)]."""
        raise NotImplementedError(f"{type(self).__name__} must define _pieces().")

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
    def _with_char_offsets(self, texts, normalize, tokenize_with_byte_offsets):
        """Pieces of `texts` with CHARACTER offsets into the ORIGINAL text.

        Normalisation (lower-casing, accent stripping) can change byte
        lengths, so every original character is normalised on its own
        (`normalize`: flat string tensor of characters -> same shape), the
        results are joined and tokenized (`tokenize_with_byte_offsets`: [B]
        strings -> ids, start bytes, end bytes, ragged), and each piece's
        byte span is traced back to the original characters.

        Returns:
            (ids, starts, ends) as `tokenize_with_offsets` documents: int64
            code point offsets, `ends` exclusive, `text[start:end]` the
            original text of the piece.
        """
        batch, scalar = self._as_batch(texts)
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
        starts, ends = ids.with_flat_values(starts), ids.with_flat_values(ends)
        if scalar:
            return ids[0], starts[0], ends[0]
        return ids, starts, ends

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
    def starts_word(self, pieces):
        """Which pieces start a word: the vocabulary's word-initial pieces,
        and each text's first piece whatever it is (a stray "##x").

        Args:
            pieces: int `tf.RaggedTensor` [B, (pieces)] of ids.

        Returns:
            bool `tf.RaggedTensor` [B, (pieces)].
        """
        flat = pieces.flat_values
        position = tf.range(tf.shape(flat, out_type=tf.int64)[0])
        row_start = tf.gather(pieces.row_starts(), pieces.value_rowids())
        return pieces.with_flat_values(tf.logical_or(
            self._begins_word(flat), tf.equal(position, row_start)
        ))

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
