"""ALBERT's SentencePiece tokenizer on tensorflow-text, usable in tf.data and
graphs, with the interface of `WordPieceTokenizer`.

Built on `tensorflow_text.SentencepieceTokenizer` (the op TF Hub's ALBERT
preprocessors use). The serialized model is an attribute of the op's
resource, so an exported SavedModel carries it inside its graph and needs
nothing but `tensorflow` and `tensorflow_text` to load; the `.model` file is
also tracked as an asset for readers who want the file.

With `exact_unigram` the op only normalizes (or, for a model rebuilt from a
tokenizer.json, `precompiled_charsmap` does as `tokenizers` would) and our
own Unigram lattice (`unigram_lattice`, core TensorFlow ops) segments, in
the source library's arithmetic: its ids on every text.
"""

import hashlib
import os

import numpy as np
import tensorflow as tf
from tensorflow.python.trackable import resource

from kerasbert.text.families import SENTENCEPIECE
from kerasbert.text.families import WORD_START as _WORD_START
from kerasbert.text.families import special_ids
from kerasbert.text.families import word_starts
from kerasbert.text.hf_tokenizer_files import TOKENIZER_JSON_MODEL
from kerasbert.text.hf_tokenizer_files import UNSPLIT
from kerasbert.text.hf_tokenizer_files import float64_scores
from kerasbert.text.precompiled_charsmap import PrecompiledNormalizer
from kerasbert.text.special_strings import WHITESPACE
from kerasbert.text.special_strings import default_added_tokens
from kerasbert.text.string_ops import lower_case as lower
from kerasbert.text.string_ops import with_char_offsets
from kerasbert.text.subword_tokenizer import SubwordTokenizer
from kerasbert.text.unigram_lattice import UnigramLattice
from kerasbert.text.unigram_lattice import characters
from kerasbert.text.unigram_lattice import row_ids

# SentencePiece marks a piece that begins after whitespace (a new word).
WORD_START = _WORD_START[SENTENCEPIECE]
#: `exact_unigram`'s default (see the class docstring).
EXACT_UNIGRAM = False


class _SharedSentencepieceModel(resource.TrackableResource):
    """The op's model resource, under a `shared_name` derived from the model.

    tensorflow-text's own resource is private to the kernel that created it,
    and eager kernels are dropped whenever the kernel cache is cleared, which
    `tf.random.set_seed` (and so `keras.utils.set_random_seed`) does: every
    later call then fails with "Resource ... SentencepieceResource does not
    exist". A shared resource lives in the resource manager instead. The name
    is a hash of the model, so tokenizers (or loaded SavedModels) sharing a
    name share identical, read-only models; each distinct model stays in
    memory until the process ends.
    """

    def __init__(self, model):
        super().__init__()
        self._model = model
        digest = hashlib.sha256(model).hexdigest()[:24]
        self._shared_name = f"kerasbert_sentencepiece_{digest}"
        _ = self.resource_handle  # Creates the resource now.

    def _create_resource(self):
        from tensorflow_text.python.ops import sentencepiece_tokenizer

        return sentencepiece_tokenizer.gen_sentencepiece_tokenizer.sentencepiece_op(
            model=self._model, shared_name=self._shared_name
        )


def _lower(texts, lower_case):
    return lower(texts) if lower_case else texts


class SentencePieceTokenizer(SubwordTokenizer):
    """ALBERT SentencePiece tokenizer over a SentencePiece `.model` file.

    With `lower_case=True` (ALBERT uncased) text is lower-cased (Unicode)
    before SentencePiece, which then applies the normalisation stored in the
    model (NFKC and whitespace clean-up for models from
    `train_sentencepiece`). Text like "[MASK]" is text: control symbols never
    come out of the op, so user input cannot inject special tokens, unless
    `special_tokens_in_strings` (`kerasbert.text.special_strings`).

    Special ids are looked up by their pieces ("<pad>", "<unk>", "[CLS]",
    "[SEP]", "[MASK]"; ids 0-4 in ALBERT's and `train_sentencepiece`'s
    models).

    All ops are TensorFlow ops: the tokenizer works eagerly, inside
    `tf.data.Dataset.map` and inside `tf.function`s / SavedModels.

    Args:
        model_file: path of a SentencePiece `.model` (serialized ModelProto).
        lower_case: lower-case before SentencePiece (ALBERT uncased).
        special_tokens_in_strings: match the special tokens in text, as the
            `tokenizers` library does (default False: text is text).
        added_tokens: the `AddedToken`s the source registers (a
            tokenizer.json's added_tokens); None: <pad> <unk> [CLS] [SEP]
            [MASK] ([MASK] with lstrip), as transformers' AlbertTokenizer
            registers them.
        tokenizers_unigram: the model is a `tokenizers` Unigram model
            rebuilt from its tokenizer.json
            (`hf_tokenizer_files.unigram_model_proto`), and tokenizes as the
            `tokenizers` library does: whitespace as its Replace(" {2,}", " ")
            and Metaspace steps leave it (a text ending in whitespace ends
            with a "▁" piece), and, with `special_tokens_in_strings`, the
            special pieces are ordinary pieces of the Unigram lattice (text
            that normalizes to "[MASK]", e.g. fullwidth "［MASK］", is
            [MASK]). False: SentencePiece's own (whitespace at the ends
            dropped, runs collapsed; control pieces never come from text).
        truncate_at_nul: drop the text after a NUL character (keras-hub's
            byte-level BPE does; its SentencePiece tokenizer does not).
        exact_unigram: the ids of the library the model comes from on
            every text: the `sentencepiece` library for a `.model`,
            `tokenizers` for a model rebuilt from a tokenizer.json (its
            Precompiled normalizer per grapheme, its pre-tokenizer's words,
            float64 path scores), through our own Unigram lattice
            (`kerasbert.text.unigram_lattice`) with the library's
            arithmetic and tie-breaking. Off (the default, several times
            faster): the op's Viterbi, whose path scores add in double
            (tensorflow-text embeds sentencepiece 0.1.96; the library adds
            in float32), so a few exact ties ("1" + "11" against "11" +
            "1") break the other way, and SentencePiece's normalization for
            a tokenizer.json (a grapheme of 6 or more bytes composed).

    Example:

    >>> import pathlib, tempfile
    >>> from kerasbert.text import SentencePieceTokenizer, train_sentencepiece
    >>> corpus = pathlib.Path(tempfile.mkdtemp()) / "corpus.txt"
    >>> _ = corpus.write_text("hello world\\nhello there world\\nthe world says hello\\n")
    >>> model, _ = train_sentencepiece(corpus, 20, corpus.parent / "sp", character_coverage=1.0,
    ...                                num_threads=1)
    >>> tokenizer = SentencePieceTokenizer(model)
    >>> ids = tokenizer.tokenize_ids(["Hello world"])       # [B, (pieces)] int32
    >>> tokenizer.detokenize(ids).numpy()
    array([b'hello world'], dtype=object)
    >>> tokenizer.tokenize(["Hello worlds"]).shape.as_list()   # [B, (words), (pieces)]
    [1, None, None]
    """

    family = SENTENCEPIECE  # what `kerasbert.text.families` knows it by

    def __init__(self, model_file, lower_case=True, special_tokens_in_strings=False,
                 added_tokens=None, tokenizers_unigram=False, truncate_at_nul=False,
                 exact_unigram=EXACT_UNIGRAM, name=None):
        super().__init__(name=name)
        import tensorflow_text as tf_text

        model_file = os.fspath(model_file)
        if not tf.io.gfile.exists(model_file):
            raise FileNotFoundError(f"SentencePiece model not found: {model_file}")
        with tf.io.gfile.GFile(model_file, "rb") as f:
            proto = f.read()
        self._model_path = model_file
        self.lower_case = bool(lower_case)
        self.tokenizers_unigram = bool(tokenizers_unigram)
        self.truncate_at_nul = bool(truncate_at_nul)
        self.exact_unigram = bool(exact_unigram)
        file_proto = proto
        if self.tokenizers_unigram:
            # Every space reaches the op; `_metaspace_keep` then drops the
            # "▁" pieces tokenizers' collapsing would not have made.
            proto, self._dummy_prefix = _as_tokenizers_unigram(
                proto, model_file, bool(special_tokens_in_strings))
        try:
            self._sp = tf_text.SentencepieceTokenizer(model=proto, out_type=tf.int32)
            self._sp._model_resource = _SharedSentencepieceModel(proto)
            size = int(self._sp.vocab_size())
        except tf.errors.OpError as error:
            raise ValueError(
                f"{model_file} is not a SentencePiece model: {error.message}"
            ) from None
        pieces = self._sp.id_to_string(tf.range(size)).numpy()
        self._vocab = [p.decode("utf-8") for p in pieces]
        # ALBERT's special pieces (train_sentencepiece adds them).
        for attr, value in special_ids(SENTENCEPIECE, self._vocab, model_file).items():
            setattr(self, attr, value)
        # Tracked, so an exported SavedModel carries assets/<model file name>.
        self.model_asset = tf.saved_model.Asset(model_file)
        starts = word_starts(SENTENCEPIECE, self._vocab)
        self._set_vocabulary(self._vocab, starts)
        self._metaspace_start = tf.constant(starts, tf.bool)
        self._space_id = self._vocab.index(WORD_START) if WORD_START in self._vocab else -1
        self._set_added_tokens(
            default_added_tokens(SENTENCEPIECE, self._vocab) if added_tokens is None
            else added_tokens, special_tokens_in_strings, model_file)
        if self.exact_unigram:
            self._exact = _ExactUnigram(proto, file_proto, model_file, self._sp,
                                        self.tokenizers_unigram, self.special_tokens_in_strings)

    # --- vocabulary ---------------------------------------------------------

    @property
    def model_file(self):
        return self._model_path

    # --- tokenization -------------------------------------------------------

    def _text_pieces(self, batch):
        if self.exact_unigram:
            return self._exact.encode(_lower(batch, self.lower_case))[0]
        ids = self._sp.tokenize(_lower(batch, self.lower_case))
        if not self.tokenizers_unigram:
            return ids
        return tf.ragged.boolean_mask(ids, self._metaspace_keep(ids))

    @tf.autograph.experimental.do_not_convert
    def _metaspace_keep(self, ids):
        """Which pieces tokenizers' whitespace handling makes too: with
        every space kept, a run of N spaces gives N - 1 lone "▁" pieces
        before the "▁word" that follows (tokenizers collapses the run to
        one space first), and a text starting with a space a "▁" before
        it (tokenizers prepends no "▁" to a text that has one). A lone
        "▁" followed by a "▁"-piece is what collapsing removes; one at the
        end of a text stays (tokenizers keeps a final space as "▁"). And a
        text that normalizes to nothing ("\x07") gets SentencePiece's dummy
        "▁" alone, where tokenizers gives no piece."""
        flat = ids.flat_values
        rows = ids.value_rowids()
        next_ids = tf.concat([flat[1:], [0]], 0)
        same_row = tf.concat([tf.equal(rows[1:], rows[:-1]), [False]], 0)
        space = tf.equal(flat, self._space_id)
        drop = space & same_row & tf.gather(self._metaspace_start, next_ids)
        if self._dummy_prefix:
            drop |= space & tf.equal(tf.gather(ids.row_lengths(), rows), 1)
        return ids.with_flat_values(tf.logical_not(drop))

    def _lookup(self, tokens):
        return self._sp.string_to_id(tokens)

    def _join_pieces(self, ids):
        # "▁" becomes a space; control pieces ([CLS], ...) are dropped.
        return self._sp.detokenize(ids)

    @tf.autograph.experimental.do_not_convert
    def _text_offsets(self, batch):
        """Text -> SentencePiece ids with CHARACTER offsets into the ORIGINAL
        text.

        The op reports UTF-8 byte offsets into the text it was given (its
        own NFKC normalisation is already mapped back). Lower-casing can
        change byte lengths ("Ω" U+2126, 3 bytes -> "ω", 2 bytes), so every
        original character is lower-cased on its own, the results are joined
        and tokenized, and each piece's byte span is traced back to the
        original characters. `text[start:end]` (Python `str`, code points)
        is then the original text of the piece, case included. Pieces carry
        the whitespace before them ("▁word" starts at the space).

        Args:
            batch: string [B].

        Returns:
            (ids, starts, ends): int32 `tf.RaggedTensor`s [B, (pieces)];
            `starts`/`ends` are int64 code point offsets, `ends` exclusive.
        """
        def with_byte_offsets(joined):
            if self.exact_unigram:
                return self._exact.encode(joined)
            ids, starts, ends = self._sp.tokenize_with_offsets(joined)
            if not self.tokenizers_unigram:
                return ids, starts, ends
            keep = self._metaspace_keep(ids)
            return tuple(tf.ragged.boolean_mask(t, keep) for t in (ids, starts, ends))

        return with_char_offsets(batch, lambda chars: _lower(chars, self.lower_case),
                                 with_byte_offsets)


def _as_tokenizers_unigram(proto, source, special_pieces):
    """The serialized model for `tokenizers_unigram`: `remove_extra_whitespaces`
    off (every space becomes a "▁"); with `special_pieces` its control
    pieces made ordinary ones (tokenizers' Unigram lattice holds every
    piece of its vocabulary). Returns (serialized model, whether it adds
    the dummy "▁" prefix)."""
    from sentencepiece import sentencepiece_model_pb2  # lazy: only rebuilt models need it

    model = sentencepiece_model_pb2.ModelProto()
    try:
        model.ParseFromString(proto)
    except Exception as error:  # noqa: BLE001 - protobuf's DecodeError, named below
        raise ValueError(f"{source} is not a SentencePiece model: {error}") from None
    model.normalizer_spec.remove_extra_whitespaces = False
    if special_pieces:
        types = sentencepiece_model_pb2.ModelProto.SentencePiece
        for piece in model.pieces:
            if piece.type == types.CONTROL:
                piece.type = types.NORMAL
    return model.SerializeToString(), model.normalizer_spec.add_dummy_prefix


class _ExactUnigram(tf.Module):
    """The ids of the library a model comes from, exactly: its
    normalization, then our Unigram lattice (`unigram_lattice`) with the
    library's arithmetic.

    sentencepiece (a `.model`): the op normalizes (its pieces, joined, are
    the normalized text; each maps back to the original bytes it covers),
    the lattice runs over each whole text in float32.

    tokenizers (a model rebuilt from a tokenizer.json): `tokenizers`'
    pipeline in TensorFlow ops: the Precompiled normalizer per grapheme
    (`precompiled_charsmap`); whitespace as its Replace(" {2,}", " ") and
    Metaspace leave it (`tokenizers_unigram`), else split off as
    WhitespaceSplit does; "▁" prepended to each pre-token that does not
    start with one (prepend_scheme "always"); words cut before each "▁";
    the lattice over each word in float64, every piece of the vocabulary
    in it but the unknown piece and (with the special-token switch off)
    the special ones.
    """

    def __init__(self, proto, file_proto, source, sentencepiece_op, tokenizers_unigram,
                 special_pieces):
        super().__init__()
        from sentencepiece import sentencepiece_model_pb2  # lazy: the model's pieces

        model = sentencepiece_model_pb2.ModelProto()
        try:
            model.ParseFromString(proto)
        except Exception as error:  # noqa: BLE001 - protobuf's DecodeError, named below
            raise ValueError(f"{source} is not a SentencePiece model: {error}") from None
        trainer = sentencepiece_model_pb2.TrainerSpec
        if model.trainer_spec.model_type != trainer.UNIGRAM:
            raise ValueError(f"{source}: exact_unigram needs a Unigram model, this one is "
                             f"{trainer.ModelType.Name(model.trainer_spec.model_type)}.")
        self._sp = sentencepiece_op
        spec = model.normalizer_spec
        self.tokenizers = spec.name in (TOKENIZER_JSON_MODEL, TOKENIZER_JSON_MODEL + UNSPLIT)
        self._split = spec.name != TOKENIZER_JSON_MODEL + UNSPLIT
        self._whitespace_split = self.tokenizers and not tokenizers_unigram
        self._prepend = spec.add_dummy_prefix
        types = sentencepiece_model_pb2.ModelProto.SentencePiece
        kinds = [p.type for p in model.pieces]
        unk_id = kinds.index(types.UNKNOWN)
        if self.tokenizers:
            lattice = [i for i, kind in enumerate(kinds) if kind != types.UNKNOWN and (
                kind != types.CONTROL or special_pieces)]
            scores = np.array([p.score for p in model.pieces], np.float64)
            exact = float64_scores(file_proto)
            if exact is not None and len(exact) == len(scores):
                scores = np.array(exact, np.float64)
            unk_score = scores.min() - 10.0
            lattice_scores = scores[lattice]
        else:
            # sentencepiece: NORMAL pieces and USER_DEFINED ones (these score
            # bytes x the highest NORMAL score - 0.1), float32 throughout.
            lattice = [i for i, kind in enumerate(kinds) if kind in (types.NORMAL,
                                                                     types.USER_DEFINED)]
            normal = np.array([p.score for p, kind in zip(model.pieces, kinds)
                               if kind == types.NORMAL], np.float32)
            float_max = np.finfo(np.float32)
            lowest = normal.min() if len(normal) else float_max.max
            highest = max(normal.max(), float_max.tiny) if len(normal) else float_max.tiny
            unk_score = np.float32(lowest - np.float32(10))
            lattice_scores = np.array([
                np.float32(np.float32(len(model.pieces[i].piece.encode()) * highest)
                           - np.float32(0.1)) if kinds[i] == types.USER_DEFINED
                else np.float32(model.pieces[i].score) for i in lattice], np.float32)
        byte_ids = None
        if model.trainer_spec.byte_fallback:
            index = {p.piece: i for i, p in enumerate(model.pieces)}
            byte_ids = [index.get(f"<0x{b:02X}>", -1) for b in range(256)]
            if not self.tokenizers:
                # The op writes an unknown character as <0xNN> pieces: their bytes.
                self._bytes = tf.lookup.StaticHashTable(
                    tf.lookup.KeyValueTensorInitializer(
                        tf.constant([f"<0x{b:02X}>" for b in range(256)]),
                        tf.constant([bytes([b]) for b in range(256)])),
                    default_value="")
        self._byte_fallback = byte_ids is not None
        self.lattice = UnigramLattice([model.pieces[i].piece for i in lattice], lattice,
                                      lattice_scores, unk_id, unk_score,
                                      float64=self.tokenizers, byte_ids=byte_ids,
                                      bytes_all_or_none=self.tokenizers)
        if self.tokenizers:
            self.normalizer = PrecompiledNormalizer(spec.precompiled_charsmap)
        # One graph for eager calls (a loop of eager ops is slow); held out
        # of tracking, so a SavedModel keeps it only inside its callers.
        self._compiled = _Untracked(tf.function(
            lambda texts: self._encode_batch(texts),
            input_signature=[tf.TensorSpec([None], tf.string)]))

    def encode(self, texts):
        """texts [B] -> (ids, start bytes, end bytes) [B, (pieces)]: int32
        ids, int64 byte offsets into the texts."""
        return self._compiled.function(texts)

    @tf.autograph.experimental.do_not_convert
    def _encode_batch(self, texts):
        num_texts = tf.size(texts, out_type=tf.int64)
        if self.tokenizers:
            chars, splits, starts, ends, word_rows = self._tokenizers_words(texts)
        else:
            chars, splits, starts, ends = self._op_normalized(texts)
        ids, first, stop, piece_splits = self.lattice.encode(chars, splits)
        if self.tokenizers:  # words -> texts
            words = tf.math.unsorted_segment_sum(tf.ones_like(word_rows), word_rows, num_texts)
            piece_splits = tf.gather(piece_splits, tf.concat([[0], tf.cumsum(words)], 0))
        offsets = (tf.gather(starts, first), tf.gather(ends, stop - 1))
        return tuple(tf.RaggedTensor.from_row_splits(values, piece_splits, validate=False)
                     for values in (ids,) + offsets)

    def _op_normalized(self, texts):
        """SentencePiece's normalized text from the op: characters [N], row
        splits [B + 1], and each character's original byte span. A
        character inside a piece whose normalized bytes are its original
        ones maps to its own bytes, else to the piece's span."""
        from tensorflow_text.python.ops.sentencepiece_tokenizer import (  # lazy: the op's module
            gen_sentencepiece_tokenizer)

        pieces, splits, piece_start, piece_end = (
            gen_sentencepiece_tokenizer.sentencepiece_tokenize_with_offsets_op(
                self._sp._model_resource.resource_handle, texts, 0, 1.0, False, False, False,
                tf.string, return_nbest=False, Tsplits=tf.int64))
        piece_start = tf.cast(piece_start, tf.int64)
        piece_end = tf.cast(piece_end, tf.int64)
        if self._byte_fallback:
            # An unknown character came as <0xNN> pieces, which are no text:
            # the bytes of each run of them make one piece.
            as_byte = self._bytes.lookup(pieces)
            is_byte = tf.strings.length(as_byte, unit="BYTE") > 0
            rows = row_ids(splits)
            row_start = tf.equal(tf.range(tf.size(pieces, out_type=tf.int64)),
                                 tf.gather(splits, rows))
            run = is_byte & tf.concat([[False], is_byte[:-1]], 0) & tf.logical_not(row_start)
            group = tf.cumsum(1 - tf.cast(run, tf.int64)) - 1
            kept = tf.where(tf.logical_not(run))[:, 0]
            groups = tf.size(kept, out_type=tf.int64)
            pieces = tf.strings.unsorted_segment_join(tf.where(is_byte, as_byte, pieces), group,
                                                      groups)
            piece_start = tf.math.unsorted_segment_min(piece_start, group, groups)
            piece_end = tf.math.unsorted_segment_max(piece_end, group, groups)
            splits = tf.concat([[0], tf.cumsum(tf.math.unsorted_segment_sum(
                tf.ones_like(kept), tf.gather(rows, kept), tf.size(texts, out_type=tf.int64)))], 0)
        chars, _, char_splits, within, within_end = characters(pieces)
        piece = row_ids(char_splits)
        p_start, p_end = tf.gather(piece_start, piece), tf.gather(piece_end, piece)
        same = tf.equal(p_end - p_start, tf.gather(tf.cast(
            tf.strings.length(pieces, unit="BYTE"), tf.int64), piece))
        starts = tf.where(same, p_start + within, p_start)
        ends = tf.where(same, p_start + within_end, p_end)
        return chars, tf.gather(char_splits, splits), starts, ends

    def _tokenizers_words(self, texts):
        """`tokenizers`' normalized words: characters [N], word splits [W +
        1], each character's original byte span, and each word's text."""
        chars, splits, starts, ends = self.normalizer.normalize(texts)
        n = tf.size(chars, out_type=tf.int64)
        rows = row_ids(splits)
        row_first = tf.equal(tf.range(n), tf.gather(splits, rows))
        previous = tf.concat([[""], chars[:-1]], 0)
        if self._whitespace_split:
            space = tf.strings.regex_full_match(chars, f"[{WHITESPACE}]")
            keep = tf.logical_not(space)
            begins = keep & (row_first | tf.concat([[False], space[:-1]], 0))
        else:
            space = tf.equal(chars, " ")
            keep = tf.logical_not(space & tf.equal(previous, " ") & tf.logical_not(row_first))
            begins = row_first
            chars = tf.where(space, WORD_START, chars)
        kept = tf.where(keep)[:, 0]
        chars, starts, ends, rows, begins = (tf.gather(t, kept) for t in (
            chars, starts, ends, rows, begins))
        if self._prepend:
            # A "▁" before each pre-token that does not start with one.
            insert = begins & tf.not_equal(chars, WORD_START)
            at = tf.where(insert)[:, 0]
            new_at = tf.range(tf.size(chars, out_type=tf.int64)) + tf.cumsum(
                tf.cast(insert, tf.int64))
            order = tf.math.invert_permutation(tf.concat([new_at, tf.gather(new_at, at) - 1], 0))

            def place(values, extra):
                return tf.gather(tf.concat([values, extra], 0), order)

            chars = place(chars, tf.fill(tf.shape(at), WORD_START))
            starts, ends = place(starts, tf.gather(starts, at)), place(ends, tf.gather(starts, at))
            rows = place(rows, tf.gather(rows, at))
            begins = place(begins & tf.logical_not(insert), tf.ones(tf.shape(at), tf.bool))
        word_first = begins | tf.equal(chars, WORD_START) if self._split else begins
        first_at = tf.where(word_first)[:, 0]
        word_splits = tf.concat([first_at, tf.size(chars, out_type=tf.int64)[None]], 0)
        return chars, word_splits, starts, ends, tf.gather(rows, first_at)


class _Untracked:
    """Holds a value where `tf.Module` does not look (no trackable, no
    saved function)."""

    def __init__(self, function):
        self.function = function
