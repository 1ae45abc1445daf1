"""Shared helpers for the fine-tuning data tests: a tiny vocabulary that
covers any lower-case ASCII word (letters and ##letters), some whole words,
Korean, CJK and accents; the small file writers of kerasbert.testing.files."""

import unicodedata

from kerasbert.testing.files import write_csv  # noqa: F401  (the tests import them here)
from kerasbert.testing.files import write_jsonl  # noqa: F401
from kerasbert.testing.files import write_text  # noqa: F401
from kerasbert.testing.files import write_vocabulary

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = (
    "the a cat dog sat on mat paris france capital city is of what where who "
    "when river seine flows through 1990 ##s 19 ##90 ( ) . , ? ! ' \" - : "
    "café cafe good bad movie great 中 国 北 京 首 都 是 "
    "정말 좋 ##아요 재미 ##있 ##다 영화 별로 ##야"
).split()
NFD = lambda s: unicodedata.normalize("NFD", s)  # noqa: E731
KOREAN = ["정말", "좋", "##아요", "재미", "##있", "##다", "영화", "별로", "##야"]


def write_vocab(directory):
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    digits = [str(d) for d in range(10)]
    tokens = SPECIALS + letters + digits + ["##" + c for c in letters + digits] + WORDS
    # Uncased BERT normalizes Hangul to NFD jamo: hold both forms.
    tokens += [NFD(w) if not w.startswith("##") else "##" + NFD(w[2:]) for w in KOREAN]
    return write_vocabulary(directory, tokens)


def tokenizer(directory, lower_case=True):
    from kerasbert.text import WordPieceTokenizer

    return WordPieceTokenizer(write_vocab(str(directory)), lower_case=lower_case)
