"""A `tokenizers` library tokenizer.json as the files of a kerasbert
tokenizer family, in plain Python (no TensorFlow): a WordPiece vocab.txt, a
byte-level (or GPT-1) BPE vocab.json + merges.txt, or a SentencePiece model
rebuilt from a Unigram model, written once under the kerasbert cache; a
byte-level BPE packed "[CLS] $A [SEP]" (ModernBERT's) is read as it is
(`BERT_BPE`). `tokenizer_json_settings` gives the constructor options and
casing the file states, so a bare tokenizer.json loads the tokenizer its
model folder loads.
"""

import hashlib
import json
import os

from kerasbert.errors import UsageError
from kerasbert.io_utils import atomic_file
from kerasbert.io_utils import atomic_write_text
from kerasbert.io_utils import cache_dir
from kerasbert.text import hf_tokenizer_files
from kerasbert.text.families import BERT_BPE
from kerasbert.text.families import BPE
from kerasbert.text.families import GPT1_BPE
from kerasbert.text.families import SAVED_FILES
from kerasbert.text.families import SENTENCEPIECE
from kerasbert.text.families import SPECIAL_TOKENS
from kerasbert.text.families import WORD_END
from kerasbert.text.families import WORDPIECE


def files_from_tokenizer_json(path):
    """(kind, files) for a directory whose only tokenizer file is the
    `tokenizers` library's tokenizer.json: its WordPiece vocabulary (or
    byte-level / GPT-1 BPE vocabulary and merges, or a SentencePiece model
    rebuilt from a Unigram model: `hf_tokenizer_files.unigram_model_proto`)
    written once, atomically, under the kerasbert cache (KERASBERT_CACHE,
    default ~/.cache/kerasbert), keyed by the file's hash. A byte-level BPE
    packed "[CLS] $A [SEP]" (ModernBERT's) is the `BERT_BPE` family, whose
    tokenizer reads the tokenizer.json itself: (BERT_BPE, (path,))."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        data = json.loads(raw)
        model = data["model"]
        kind = {"WordPiece": WORDPIECE, "BPE": BPE, "Unigram": SENTENCEPIECE}.get(model.get("type"))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UsageError(f"{path}: not a tokenizers library tokenizer.json.") from None
    if kind is None:
        raise UsageError(f"{path}: a {model.get('type')} model, which kerasbert does not "
                         "read (WordPiece, BPE, Unigram).")
    if kind == BPE and model.get("end_of_word_suffix") == WORD_END:
        kind = GPT1_BPE  # GPT-1's character-level BPE
    if kind == BPE and _packs_cls(data):
        return BERT_BPE, (path,)
    return kind, _cached_files(path, raw, kind, model)


def _packs_cls(data):
    """Whether a tokenizer.json's post-processor opens a sequence with
    [CLS] (a TemplateProcessing "[CLS] $A [SEP]", as ModernBERT's)."""
    processor = data.get("post_processor") or {}
    single = processor.get("single") if isinstance(processor, dict) else None
    first = single[0] if isinstance(single, list) and single else {}
    return (processor.get("type") == "TemplateProcessing" and isinstance(first, dict)
            and (first.get("SpecialToken") or {}).get("id") == "[CLS]")


def byte_level_files(path):
    """(vocab.json, merges.txt) of a byte-level BPE tokenizer.json (its
    vocabulary with the added tokens, and its merges), cached as
    `files_from_tokenizer_json` caches them."""
    with open(path, "rb") as f:
        raw = f.read()
    return _cached_files(path, raw, BPE, json.loads(raw)["model"])


def _cached_files(path, raw, kind, model):
    folder = cache_dir("tokenizers", hashlib.sha256(raw).hexdigest()[:20])
    files = tuple(os.path.join(folder, name) for name in SAVED_FILES[kind])
    if all(os.path.isfile(f) for f in files):
        return files
    os.makedirs(folder, exist_ok=True)
    _, tokens = hf_tokenizer_files.model_vocabulary(path)
    tokens = [(t, i) for i, t in enumerate(tokens)]
    if kind == SENTENCEPIECE:  # a SentencePiece model of the same pieces and scores
        proto = hf_tokenizer_files.unigram_model_proto(
            path, special_tokens=SPECIAL_TOKENS[SENTENCEPIECE].values())
        with atomic_file(files[0]) as tmp, open(tmp, "wb") as f:
            f.write(proto)
    elif kind == WORDPIECE:
        atomic_write_text(files[0], "".join(t + "\n" for t, _ in tokens))
    else:  # vocab.json + merges.txt, byte-level or GPT-1's
        atomic_write_text(files[0], json.dumps(dict(tokens), ensure_ascii=False))
        merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
        atomic_write_text(files[1], "#version: 0.2\n" + "".join(m + "\n" for m in merges))
    return files


def tokenizer_json_settings(path, kind):
    """(constructor options, lower_case) of the tokenizer of `kind` rebuilt
    from a tokenizer.json, with the tokenizer_config.json beside it where
    there is one: a bare tokenizer.json and a model folder whose only
    tokenizer file it is (`source_tokenizers`) take these. The casing is
    the config's do_lower_case, else the file's normalizer, else cased: the
    `tokenizers` library lower-cases only where the file says so."""
    config = os.path.join(os.path.dirname(os.path.abspath(path)),
                          hf_tokenizer_files.TOKENIZER_CONFIG)
    options = hf_tokenizer_files.tokenizer_options(kind, path, config,
                                                   model_from_tokenizer_json=True)
    return options, bool(hf_tokenizer_files.lower_case(path, config))
