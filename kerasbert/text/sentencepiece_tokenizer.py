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
from kerasbert.text.subword_tokenizer import SubwordTokenizer

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
    return tf.strings.lower(texts, encoding="utf-8") if lower_case else texts


class SentencePieceTokenizer(SubwordTokenizer):
    """ALBERT SentencePiece tokenizer over a SentencePiece `.model` file.

    With `lower_case=True` (ALBERT uncased) text is lower-cased (Unicode)
    before SentencePiece, which then applies the normalisation stored in the
    model (NFKC and whitespace clean-up for models from
    `train_sentencepiece`). Text like "[MASK]" is text: control symbols never
    come out of the op, so user input cannot inject special tokens.

    Special ids are looked up by their pieces ("<pad>", "<unk>", "[CLS]",
    "[SEP]", "[MASK]"; ids 0-4 in ALBERT's and `train_sentencepiece`'s
    models).

    All ops are TensorFlow ops: the tokenizer works eagerly, inside
    `tf.data.Dataset.map` and inside `tf.function`s / SavedModels.

    Args:
        model_file: path of a SentencePiece `.model` (serialized ModelProto).
        lower_case: lower-case before SentencePiece (ALBERT uncased).

    Example:

    >>> tokenizer = SentencePieceTokenizer("albert.model")
    >>> tokenizer.tokenize_ids(["Hello world!"])   # [1, (pieces)] int32
    >>> tokenizer.tokenize(["Hello worlds"])       # [1, (2), (pieces)]
    """

    family = SENTENCEPIECE  # what `kerasbert.text.families` knows it by

    def __init__(self, model_file, lower_case=True, name=None):
        super().__init__(name=name)
        import tensorflow_text as tf_text

        model_file = os.fspath(model_file)
        if not tf.io.gfile.exists(model_file):
            raise FileNotFoundError(f"SentencePiece model not found: {model_file}")
        with tf.io.gfile.GFile(model_file, "rb") as f:
            proto = f.read()
        self._model_path = model_file
        self.lower_case = bool(lower_case)
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
        self._set_vocabulary(self._vocab, word_starts(SENTENCEPIECE, self._vocab))

    # --- vocabulary ---------------------------------------------------------

    @property
    def model_file(self):
        return self._model_path

    # --- tokenization -------------------------------------------------------

    def _pieces(self, batch):
        return self._sp.tokenize(_lower(batch, self.lower_case))

    def _lookup(self, tokens):
        return self._sp.string_to_id(tokens)

    def _join_pieces(self, ids):
        # "▁" becomes a space; control pieces ([CLS], ...) are dropped.
        return self._sp.detokenize(ids)

    @tf.autograph.experimental.do_not_convert
    def tokenize_with_offsets(self, texts):
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
            texts: a string scalar, or a 1-D string tensor/list of B texts.

        Returns:
            (ids, starts, ends): int32 `tf.RaggedTensor`s [B, (pieces)] (or
            dense [pieces] for a scalar input); `starts`/`ends` are int64 code
            point offsets, `ends` exclusive. `ids` equal `tokenize_ids(texts)`.
        """
        return self._with_char_offsets(texts, lambda chars: _lower(chars, self.lower_case),
                                       self._sp.tokenize_with_offsets)
