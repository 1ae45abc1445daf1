"""What a `--vocab` path stands for, in plain Python (no TensorFlow): its
tokenizer family and files (`resolve_tokenizer_path`, the one place that
resolves them) and its vocabulary in id order (`read_vocabulary`, what the
data writer's main process reads). The families' facts are `families`.
"""

import json
import os

from kerasbert.errors import UsageError
from kerasbert.text.families import BERT_BPE
from kerasbert.text.families import BPE
from kerasbert.text.families import BPE_MERGES
from kerasbert.text.families import BPE_VOCABULARY
from kerasbert.text.families import BYTES
from kerasbert.text.families import GPT1_BPE
from kerasbert.text.families import HF_TOKENIZER_FILES
from kerasbert.text.families import SENTENCEPIECE
from kerasbert.text.families import TOKENIZER_JSON
from kerasbert.text.families import WORD_END
from kerasbert.text.families import WORD_START
from kerasbert.text.families import WORDPIECE
from kerasbert.text.families import byte_vocabulary
from kerasbert.text.families import load_bpe_vocab
from kerasbert.text.families import with_added_specials
from kerasbert.text.hf_tokenizer_files import model_vocabulary
from kerasbert.text.tokenizer_json_files import files_from_tokenizer_json
from kerasbert.text.vocabulary import load_vocab


def read_vocabulary(path):
    """(kind, files, tokens in id order) of a `--vocab` path, in plain
    Python (no TensorFlow: the data writer's main process uses it).

    Raises `UsageError` naming a missing or unreadable file."""
    kind, files = resolve_tokenizer_path(path)
    if kind == BYTES:
        return kind, files, byte_vocabulary()
    try:
        if kind == WORDPIECE:
            tokens = load_vocab(files[0])
        elif kind == SENTENCEPIECE:
            import sentencepiece  # lazy: only SentencePiece vocabularies need it

            processor = sentencepiece.SentencePieceProcessor()
            if not processor.Load(files[0]):
                raise ValueError("not a SentencePiece model")
            tokens = [processor.IdToPiece(i) for i in range(processor.GetPieceSize())]
        elif kind == BERT_BPE:  # its vocabulary and added tokens, as its tokenizer reads them
            tokens = model_vocabulary(files[0])[1]
        else:
            tokens, _ = with_added_specials(kind, load_bpe_vocab(files[0]))
    except (OSError, RuntimeError, ValueError, UnicodeDecodeError) as error:
        raise UsageError(f"{files[0]}: {error}") from None
    return kind, files, tokens


def tokenizer_json_of(path):
    """The `tokenizers` library tokenizer.json a `--vocab` path names: the
    path itself where its name ends in "tokenizer.json" (whether or not it
    exists), the one in a directory that holds no other tokenizer file
    (`HF_TOKENIZER_FILES`); else None."""
    path = os.fspath(path)
    if os.path.isdir(path):
        inside = os.path.join(path, TOKENIZER_JSON)
        others = (os.path.join(path, name) for name in HF_TOKENIZER_FILES)
        return inside if os.path.isfile(inside) and not any(map(os.path.isfile, others)) else None
    return path if os.path.basename(path).endswith(TOKENIZER_JSON) else None


def resolve_tokenizer_path(path):
    """(kind, files) a `--vocab` path stands for; raises `UsageError` naming
    the missing file.

    Args:
        path: a vocab.txt, a SentencePiece `.model`, a directory holding
            vocab.json + merges.txt (or a model directory in the Hugging
            Face layout with its vocab.txt or spiece.model), a vocab.json
            with merges.txt beside, or a `tokenizers` tokenizer.json (or a
            directory whose only tokenizer file it is): the family its model
            is, over the files `tokenizer_json_files` rebuilds from it
            (ModernBERT's is read as it is: `BERT_BPE`, (path,)).

    Returns:
        (a family: "wordpiece", "sentencepiece", "bpe", "gpt1_bpe",
        "bert_bpe" or "bytes"; tuple of file paths in the order the
        tokenizer class takes them).
    """
    if path is None:
        raise UsageError("Give the tokenizer files (--vocab): a vocab.txt, a SentencePiece "
                         ".model, a directory with vocab.json and merges.txt, or 'bytes'.")
    path = os.fspath(path)
    if path == BYTES:
        return BYTES, ()
    tokenizer_json = tokenizer_json_of(path)
    if tokenizer_json is not None:
        if not os.path.isfile(tokenizer_json):
            raise UsageError(f"Tokenizer file not found: {tokenizer_json}")
        return files_from_tokenizer_json(tokenizer_json)
    # A directory: a byte-level BPE pair, or a model directory in the Hugging
    # Face layout with its WordPiece vocab.txt or SentencePiece model.
    in_dir = {name: os.path.join(path, name) for name in HF_TOKENIZER_FILES}
    if os.path.isdir(path) and not os.path.isfile(in_dir[BPE_VOCABULARY]) and any(
            os.path.isfile(f) for f in in_dir.values()):
        name = next(n for n, f in in_dir.items() if os.path.isfile(f))
        return resolve_tokenizer_path(in_dir[name])
    if os.path.isdir(path):
        files = (os.path.join(path, BPE_VOCABULARY), os.path.join(path, BPE_MERGES))
        kind = BPE
    elif os.path.basename(path) == BPE_VOCABULARY:
        files = (path, os.path.join(os.path.dirname(path), BPE_MERGES))
        kind = BPE
    else:
        kind = SENTENCEPIECE if path.endswith(".model") else WORDPIECE
        files = (path,)
    for name in files:
        if not os.path.isfile(name):
            what = {WORDPIECE: "Vocabulary file", SENTENCEPIECE: "SentencePiece model",
                    BPE: "BPE vocabulary file"}[kind]
            if kind == BPE and name.endswith(BPE_MERGES):
                what = "BPE merges file"
            raise UsageError(f"{what} not found: {name}")
    if kind == BPE and _marks_word_ends(files[0]):
        kind = GPT1_BPE
    return kind, files


def _marks_word_ends(vocabulary_file):
    """Whether a vocab.json is GPT-1's ("</w>" word ends, no byte-level "Ġ"
    word starts). A file that does not parse is left to the tokenizer's
    own error."""
    try:
        with open(vocabulary_file, encoding="utf-8") as f:
            tokens = json.load(f)
    except (OSError, ValueError):
        return False
    if not isinstance(tokens, dict):
        return False
    ends = sum(1 for t in tokens if t.endswith(WORD_END))
    starts = sum(1 for t in tokens if t.startswith(WORD_START[BPE]))
    return ends > starts
