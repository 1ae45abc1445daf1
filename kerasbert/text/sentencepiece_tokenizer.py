"""ALBERT's SentencePiece tokenizer on tensorflow-text, usable in tf.data and
graphs, with the interface of `WordPieceTokenizer`.

Built on `tensorflow_text.SentencepieceTokenizer` (the op TF Hub's ALBERT
preprocessors use). The serialized model is an attribute of the op's
resource, so an exported SavedModel carries it inside its graph and needs
nothing but `tensorflow` and `tensorflow_text` to load; the `.model` file is
also tracked as an asset for readers who want the file.
"""

import hashlib
import os

import tensorflow as tf
from tensorflow.python.trackable import resource

from kerasbert.text.families import SENTENCEPIECE
from kerasbert.text.families import WORD_START as _WORD_START
from kerasbert.text.families import special_ids
from kerasbert.text.families import word_starts
from kerasbert.text.special_strings import default_added_tokens
from kerasbert.text.subword_tokenizer import SubwordTokenizer
from kerasbert.text.subword_tokenizer import lower_case as lower

# SentencePiece marks a piece that begins after whitespace (a new word).
WORD_START = _WORD_START[SENTENCEPIECE]


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

    Example:

    >>> tokenizer = SentencePieceTokenizer("albert.model")
    >>> tokenizer.tokenize_ids(["Hello world!"])   # [1, (pieces)] int32
    >>> tokenizer.tokenize(["Hello worlds"])       # [1, (2), (pieces)]
    """

    family = SENTENCEPIECE  # what `kerasbert.text.families` knows it by

    def __init__(self, model_file, lower_case=True, special_tokens_in_strings=False,
                 added_tokens=None, tokenizers_unigram=False, truncate_at_nul=False, name=None):
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

    # --- vocabulary ---------------------------------------------------------

    @property
    def model_file(self):
        return self._model_path

    # --- tokenization -------------------------------------------------------

    def _text_pieces(self, batch):
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
            ids, starts, ends = self._sp.tokenize_with_offsets(joined)
            if not self.tokenizers_unigram:
                return ids, starts, ends
            keep = self._metaspace_keep(ids)
            return tuple(tf.ragged.boolean_mask(t, keep) for t in (ids, starts, ends))

        return self._with_char_offsets(batch, lambda chars: _lower(chars, self.lower_case),
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
