"""Vocabulary building, tokenizers and input packing.

Names load on first use, so importing `kerasbert.text` does not pull in
TensorFlow.
"""

from kerasbert.io_utils import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "tokenizer": ("WordPieceTokenizer",),
    "sentencepiece_tokenizer": ("SentencePieceTokenizer",),
    "byte_pair_tokenizer": ("BytePairTokenizer",),
    "gpt1_tokenizer": ("Gpt1Tokenizer",),
    "byte_tokenizer": ("ByteTokenizer",),
    "character_tokenizer": ("CharacterTokenizer",),
    "character_packer": ("CharacterPacker",),
    "packer": ("BertPacker",),
    "roberta_packer": ("RobertaPacker",),
    "tokenizer_loading": (
        "load_tokenizer", "make_packer", "segment_layout", "SegmentLayout", "tokenizer_files",
        "tokenizer_kind", "describe_tokenizer", "load_saved_tokenizer", "save_tokenizer_files",
        "tokenizer_settings", "ids_settings",
    ),
    "special_strings": ("AddedToken",),
    "bpe_training": ("train_bpe",),
    "sentencepiece_training": ("train_sentencepiece",),
    "wordpiece_training": ("build_wordpiece_vocab", "count_words", "learn_vocab"),
    "vocabulary": ("load_vocab", "write_vocab", "SPECIAL_TOKENS"),
})
