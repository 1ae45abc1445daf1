"""Sentence embeddings: a backbone and a pooling over its token vectors, as
the sentence-transformers models define them."""


import keras
import numpy as np

from kerasbert.data.finetuning.padding import padded_width
from kerasbert.errors import UsageError
from kerasbert.layers.sentence_pooling import SentencePooling
from kerasbert.layers.sentence_pooling import check_pooling
from kerasbert.preprocessing.lengths import default_sequence_length
from kerasbert.sources import source
from kerasbert.models import presets
from kerasbert.models.config_checks import check_tokenizer_fits
from kerasbert.tasks.backbone_model import BackboneModel
from kerasbert.tasks.preprocessor_factory import backbone_tokenizer
from kerasbert.tasks.task import backbone_inputs
from kerasbert.text.tokenizer_loading import load_tokenizer
from kerasbert.text.tokenizer_loading import make_packer


def sentence_model_of(handle):
    """The `SentenceModel` (kerasbert.sources.sentence_transformers) of a
    handle that is a sentence-transformers folder, else None.

    Args:
        handle: a local directory, a hub handle (hf://, kaggle://), a
            `kerasbert.sources.source.Source`, or anything else (a preset
            name, a .keras file: None).
    """
    return source.resolve(handle, presets).sentence_model


def load_sentence_encoder(handle, pooling=None, normalize=None, vocab=None, lower_case=None,
                          **switches):
    """(SentenceEncoder, tokenizer) of a handle, resolved once: what `embed`
    and the embedding export run.

    Args:
        handle, pooling, normalize: as `SentenceEncoder.from_preset`.
        vocab, lower_case, switches: as `load_sentence_tokenizer`.

    Raises:
        UsageError: as both, and a tokenizer that makes ids the model has
            no embedding row for (naming `vocab` when given).
    """
    found = source.resolve(handle, presets)
    model = SentenceEncoder.from_preset(found, pooling=pooling, normalize=normalize)
    if backbone_tokenizer(model.backbone) is not None:
        raise UsageError(f"{handle} reads characters (ELMo): it makes no sentence vectors; "
                         "`kerasbert extract-features` writes its word vectors.")
    tokenizer = load_sentence_tokenizer(found, vocab=vocab, lower_case=lower_case, **switches)
    check_tokenizer_fits(tokenizer, model.backbone,
                         f"--vocab {vocab}" if vocab else "The tokenizer")
    return model, tokenizer


def load_sentence_tokenizer(handle, vocab=None, lower_case=None, **switches):
    """The tokenizer of a sentence encoder's handle.

    Args:
        handle: as `SentenceEncoder.from_preset`.
        vocab: tokenizer files or handle to use instead of the handle's own.
        lower_case: None follows the source: its tokenizer's own setting,
            lower-cased when a sentence-transformers folder says
            `do_lower_case` (sentence_bert_config.json).
        switches: `special_tokens_in_strings`, `truncate_at_nul`, as
            `kerasbert.text.load_tokenizer` (None: the source's setting).
    """
    found = source.resolve(handle, presets)
    folder = found.sentence_model
    if lower_case is None and folder is not None and folder.do_lower_case:
        lower_case = True
    path = vocab or (folder.encoder_path if folder is not None else found)
    return load_tokenizer(path, lower_case=lower_case, **switches)


@keras.saving.register_keras_serializable(package="kerasbert")
class SentenceEncoder(BackboneModel):
    """Text -> one vector: the backbone's `sequence_output` pooled over the
    real tokens (`kerasbert.layers.SentencePooling`), optionally
    L2-normalised.

    `SentenceEncoder.from_preset(DIR)` on a sentence-transformers folder
    takes its pooling, normalisation and `max_seq_length`; on any other
    handle you choose them.

    Args:
        backbone: a `kerasbert.models.Backbone`.
        pooling: "mean" (default), "cls", "max", "mean_sqrt_len", or
            several joined with "+" / as a list (concatenated).
        normalize: bool, L2-normalise the vectors (cosine similarity is
            then a dot product).
        sequence_length: the packed length T the model is meant to run on
            (a sentence-transformers folder's `max_seq_length`; `kerasbert
            embed` and `export --task embedding` use it by default), or
            None (the caller picks).
        dtype: defaults to the backbone's policy.

    Call args:
        inputs: dict of int [B, T] `input_word_ids`, `input_mask`,
            `input_type_ids` (optional, default zeros); other keys ignored.

    Returns:
        float32 [B, hidden_dim * number of pooling modes].

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import BertBackbone
    >>> from kerasbert.tasks import SentenceEncoder
    >>> encoder = SentenceEncoder(BertBackbone.from_preset("bert_tiny", vocabulary_size=10),
    ...                           pooling="mean", normalize=True)
    >>> ids = np.array([[2, 5, 6, 3], [2, 7, 3, 0]])         # [B, T], 0 = padding
    >>> vectors = encoder({"input_word_ids": ids, "input_mask": np.int32(ids > 0)})
    >>> tuple(vectors.shape), np.round(np.linalg.norm(vectors, axis=-1), 3).tolist()   # [B, H]
    ((2, 128), [1.0, 1.0])
    """

    def __init__(self, backbone, pooling="mean", normalize=False, sequence_length=None,
                 dtype=None, **kwargs):
        super().__init__(backbone, dtype=dtype, **kwargs)
        self.pooling = check_pooling(pooling)
        self.normalize = bool(normalize)
        self.sequence_length = None if sequence_length is None else int(sequence_length)
        # float32 whatever the backbone's policy: the pooled sums and the
        # norm are where float16 would lose digits.
        self.pooler = SentencePooling(self.pooling, self.normalize, dtype="float32",
                                      name="sentence_pooling")
        self.built = True

    @property
    def output_dim(self):
        """Width of a sentence vector."""
        return self.backbone.output_dim * len(self.pooling)

    @classmethod
    def from_preset(cls, handle, *, pooling=None, normalize=None, sequence_length=None,
                    backbone_overrides=None, dtype=None, **kwargs):
        """The encoder a handle stands for.

        On a sentence-transformers folder (modules.json, 1_Pooling/,
        sentence_bert_config.json) the pooling, normalisation and
        sequence_length come from its files; arguments given here replace
        them. On any other handle (a preset, a Hugging Face model, ...) the
        arguments decide (default: mean pooling, not normalised).

        Raises:
            UsageError: the folder's files are malformed or ask for what we
                do not compute, or its pooling width differs from the
                backbone's.
        """
        handle = source.resolve(handle, presets)
        folder = handle.sentence_model
        if folder is not None:
            pooling = folder.pooling if pooling is None else pooling
            normalize = folder.normalize if normalize is None else normalize
            sequence_length = sequence_length or folder.max_seq_length
            handle = folder.encoder_path
        backbone = source.load_backbone(handle, dtype=dtype, **(backbone_overrides or {}))
        if folder is not None and folder.embedding_dim not in (None, backbone.output_dim):
            raise UsageError(
                f"{folder.path}: the pooling's word_embedding_dimension is "
                f"{folder.embedding_dim} but the encoder's width is {backbone.output_dim}.")
        if sequence_length is not None:
            positions = getattr(backbone, "max_sequence_length", None)
            if positions is not None:
                # A max_seq_length beyond the position table cannot run
                # (sentence-transformers' own default is capped there too).
                sequence_length = min(int(sequence_length), int(positions))
        return cls(backbone, pooling=pooling or "mean", normalize=bool(normalize),
                   sequence_length=sequence_length, **kwargs)

    def embed(self, texts, tokenizer, sequence_length=None, batch_size=32, chunk_size=2048):
        """Sentence vectors of raw texts, chunk by chunk, in input order.

        Each text is packed `[CLS] text [SEP]` and cut to sequence_length
        (the tail of a long text is dropped, as sentence-transformers
        does). Within a chunk the texts run sorted by length, each batch
        on its longest row (rounded up as `padded_width` rounds): padding does
        not change a vector, only the work.

        Args:
            texts: iterable of str.
            tokenizer: the backbone's tokenizer (`kerasbert.text.load_tokenizer`).
            sequence_length: T; default `self.sequence_length`, else the
                text tasks' (`preprocessing.lengths.default_sequence_length`).
            batch_size: texts per forward pass.
            chunk_size: texts sorted and embedded together (the memory held).

        Yields:
            float32 arrays [n, output_dim], one per chunk (n <= chunk_size).
        """
        sequence_length = int(sequence_length or self.sequence_length
                              or default_sequence_length())
        if sequence_length < 3:
            raise UsageError(f"sequence_length must be at least 3, got {sequence_length}.")
        positions = getattr(self.backbone, "max_sequence_length", None)
        if positions is not None and sequence_length > int(positions):
            raise UsageError(f"sequence_length {sequence_length} is longer than the backbone's "
                             f"{positions} positions.")
        if int(batch_size) < 1:
            raise UsageError(f"batch_size must be at least 1, got {batch_size}.")
        packer = make_packer(tokenizer, sequence_length)
        chunk = []
        for text in texts:
            chunk.append(text)
            if len(chunk) == max(int(chunk_size), 1):
                yield self._embed_chunk(chunk, tokenizer, packer, sequence_length, int(batch_size))
                chunk = []
        if chunk:
            yield self._embed_chunk(chunk, tokenizer, packer, sequence_length, int(batch_size))

    def _embed_chunk(self, texts, tokenizer, packer, sequence_length, batch_size):
        packed = {k: np.asarray(v, np.int32) for k, v in packer(tokenizer.tokenize_ids(texts)).items()}
        lengths = packed["input_mask"].sum(axis=1)
        order = np.argsort(-lengths, kind="stable")
        vectors = np.zeros((len(texts), self.output_dim), np.float32)
        for start in range(0, len(texts), batch_size):
            rows = order[start:start + batch_size]
            width = padded_width(lengths[rows].max(), sequence_length)
            batch = {k: v[rows, :width] for k, v in packed.items()}
            vectors[rows] = np.asarray(self.predict_on_batch(batch), np.float32)
        return vectors

    def call(self, inputs, training=False):
        features = backbone_inputs(inputs)
        outputs = self.backbone(features, training=training)
        return self.pooler(outputs["sequence_output"], features["input_mask"])

    def get_config(self):
        config = super().get_config()
        config.update({"pooling": list(self.pooling), "normalize": self.normalize,
                       "sequence_length": self.sequence_length})
        return config
