"""Vocabulary building, tokenizers and input packing.

Names load on first use, so importing `kerasbert.text` does not pull in
TensorFlow.
"""

from kerasbert.io_utils import lazy_exports

_EXPORTS = {
    "WordPieceTokenizer": "kerasbert.text.tokenizer",
    "SentencePieceTokenizer": "kerasbert.text.sentencepiece_tokenizer",
    "BytePairTokenizer": "kerasbert.text.byte_pair_tokenizer",
    "BertPacker": "kerasbert.text.packer",
    "RobertaPacker": "kerasbert.text.roberta_packer",
    "load_tokenizer": "kerasbert.text.loading",
    "make_packer": "kerasbert.text.loading",
    "segment_layout": "kerasbert.text.loading",
    "SegmentLayout": "kerasbert.text.loading",
    "tokenizer_files": "kerasbert.text.loading",
    "tokenizer_kind": "kerasbert.text.loading",
    "describe_tokenizer": "kerasbert.text.loading",
    "load_saved_tokenizer": "kerasbert.text.loading",
    "save_tokenizer_files": "kerasbert.text.loading",
    "train_bpe": "kerasbert.text.bpe_training",
    "train_sentencepiece": "kerasbert.text.sentencepiece_training",
    "build_wordpiece_vocab": "kerasbert.text.wordpiece_training",
    "count_words": "kerasbert.text.wordpiece_training",
    "learn_vocab": "kerasbert.text.wordpiece_training",
    "load_vocab": "kerasbert.text.vocabulary",
    "write_vocab": "kerasbert.text.vocabulary",
    "SPECIAL_TOKENS": "kerasbert.text.vocabulary",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports("kerasbert.text", _EXPORTS)
