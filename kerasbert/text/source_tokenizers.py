"""The tokenizer files of a model directory, and the casing its source set.

    directory                     files                                  casing from
    Hugging Face (config.json     vocab.txt | spiece.model |             tokenizer_config.json
      with model_type)              vocab.json + merges.txt                do_lower_case, else
                                                                           tokenizer.json's normalizer
    keras-hub preset              assets/tokenizer/vocabulary.txt |      tokenizer.json "lowercase"
      (config.json with             vocabulary.spm | vocabulary.json
       registered_name)             + merges.txt
    google-research/bert          vocab.txt                              the name: "cased_L-..." is
      (bert_config.json)                                                   cased, others uncased
    TF Hub encoder                assets/vocab.txt | assets/*.model      its do_lower_case variable
      (saved_model.pb)
    kerasbert run                 what its config.json's "tokenizer"     the same entry
                                    names

`tokenizer_source(source)` returns (kind, files, lower_case or None) for a
resolved `kerasbert.sources.source.Source`; `kerasbert.text.load_tokenizer`
uses it for model directories and hub handles.
"""

import hashlib
import json
import os

from kerasbert.errors import UsageError
from kerasbert.io_utils import atomic_file
from kerasbert.io_utils import atomic_write_text
from kerasbert.io_utils import cache_dir
from kerasbert.io_utils import json_or_none
from kerasbert.sources.source import HF
from kerasbert.sources.source import KERAS_HUB
from kerasbert.sources.source import TF1
from kerasbert.sources.source import TF_HUB
from kerasbert.text.families import BERT_BPE
from kerasbert.text.families import BPE
from kerasbert.text.families import BPE_MERGES
from kerasbert.text.families import GPT1_BPE
from kerasbert.text.families import WORD_END
from kerasbert.text.families import HF_TOKENIZER_FILES
from kerasbert.text.families import SAVED_FILES
from kerasbert.text.families import SENTENCEPIECE
from kerasbert.text.families import SPECIAL_TOKENS
from kerasbert.text.families import WORDPIECE
from kerasbert.text.families import resolve_tokenizer_path
from kerasbert.text import hf_tokenizer_files

#: keras-hub's asset file name -> tokenizer family.
KERAS_HUB_ASSETS = {"vocabulary.txt": WORDPIECE, "vocabulary.spm": SENTENCEPIECE,
                    "vocabulary.json": BPE}


def tokenizer_source(source):
    """(kind, files, lower_case) of a published model (a resolved
    `kerasbert.sources.source.Source`; see the module docstring); lower_case
    is None where the source does not say. None for a source that is no
    published layout (a preset, a `.keras` file, a run or tokenizer folder)."""
    reader = _TOKENIZER_READERS.get(source.kind)
    return reader(source) if reader is not None else None


def _hf(source):
    directory = source.path
    in_dir = [os.path.join(directory, n) for n in HF_TOKENIZER_FILES]
    if not any(os.path.isfile(f) for f in in_dir) and os.path.isfile(
            os.path.join(directory, "tokenizer.json")):
        kind, files = files_from_tokenizer_json(os.path.join(directory, "tokenizer.json"))
    else:
        kind, files = resolve_tokenizer_path(directory)
    return kind, files, _hf_lower_case(directory, source.model_type)


def _tf1(source):
    kind, files = resolve_tokenizer_path(os.path.join(source.path, "vocab.txt"))
    name = os.path.basename(os.path.normpath(source.path)).lower()
    cased = name.startswith("cased") or "_cased" in name or "-cased" in name
    return kind, files, not cased


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


#: Casing of a family's Hugging Face tokenizer when tokenizer_config.json
#: does not say (BigBird's SentencePiece model is cased).
HF_DEFAULT_LOWER_CASE = {"big_bird": False}


def _hf_lower_case(directory, model_type):
    lower = hf_tokenizer_files.lower_case(
        os.path.join(directory, hf_tokenizer_files.TOKENIZER_JSON),
        os.path.join(directory, hf_tokenizer_files.TOKENIZER_CONFIG))
    return HF_DEFAULT_LOWER_CASE.get(model_type) if lower is None else lower


def tokenizer_options(source, kind):
    """The tokenizer constructor options a published source states
    (`hf_tokenizer_files`): a Hugging Face tokenizer's longest word and
    added tokens, google-research/bert's longest word of 200 characters,
    keras-hub's WordPiece pipeline and special-token setting."""
    options = _TOKENIZER_OPTIONS.get(source.kind)
    return options(source.path, kind) if options is not None else {}


def _hf_options(directory, kind):
    from_json = not any(os.path.isfile(os.path.join(directory, n)) for n in HF_TOKENIZER_FILES)
    return hf_tokenizer_files.tokenizer_options(
        kind, os.path.join(directory, hf_tokenizer_files.TOKENIZER_JSON),
        os.path.join(directory, hf_tokenizer_files.TOKENIZER_CONFIG), from_json)


def _tf1_options(directory, kind):
    return ({"max_chars_per_word": hf_tokenizer_files.GOOGLE_BERT_MAX_CHARS}
            if kind == WORDPIECE else {})


def _keras_hub_options(directory, kind):
    return hf_tokenizer_files.keras_hub_options(kind, os.path.join(directory, "tokenizer.json"))


def _keras_hub(source):
    directory = source.path
    assets = os.path.join(directory, "assets", "tokenizer")
    for name, kind in KERAS_HUB_ASSETS.items():
        path = os.path.join(assets, name)
        if os.path.isfile(path):
            files = (path, os.path.join(assets, BPE_MERGES)) if kind == BPE else (path,)
            if not all(os.path.isfile(f) for f in files):
                raise UsageError(f"{directory}: keras-hub preset without {files[-1]}.")
            settings = (json_or_none(os.path.join(directory, "tokenizer.json")) or {}).get("config", {})
            # keras-hub's tokenizers lower-case only when their config says so
            # (its SentencePiece tokenizer never does).
            return kind, files, bool(settings.get("lowercase", False))
    raise UsageError(f"{directory}: a keras-hub preset without tokenizer assets "
                     f"(assets/tokenizer/{' | '.join(KERAS_HUB_ASSETS)}).")


def _tf_hub(source):
    directory = source.path
    files = []
    # The encoder's own vocabulary asset, else its preprocessor's beside it
    # (TF Hub publishes them as a pair: .../encoder and .../preprocess).
    for assets in (os.path.join(directory, "assets"),
                   os.path.join(os.path.dirname(os.path.normpath(directory)), "preprocess",
                                "assets")):
        names = sorted(os.listdir(assets)) if os.path.isdir(assets) else []
        files = files or [os.path.join(assets, n) for n in names
                          if n == "vocab.txt" or n.endswith(".model")]
    if not files:
        raise UsageError(f"{directory}: a SavedModel without assets/vocab.txt or a "
                         "SentencePiece model, and no preprocess/ beside it (pass the "
                         "tokenizer with --vocab).")
    kind, files = resolve_tokenizer_path(files[0])
    return kind, files, _saved_lower_case(directory)


def _saved_lower_case(directory):
    # The TF Hub encoders carry do_lower_case as a variable: read it from the
    # checkpoint without loading the graph.
    import tensorflow as tf  # lazy: only SavedModel sources need it

    try:
        reader = tf.train.load_checkpoint(os.path.join(directory, "variables", "variables"))
        return bool(reader.get_tensor("do_lower_case/.ATTRIBUTES/VARIABLE_VALUE"))
    except (ValueError, tf.errors.OpError):
        return None


#: The tokenizer files of each published layout (`tokenizer_source`) and
#: the constructor options it states (`tokenizer_options`), by source kind.
_TOKENIZER_READERS = {HF: _hf, KERAS_HUB: _keras_hub, TF1: _tf1, TF_HUB: _tf_hub}
_TOKENIZER_OPTIONS = {HF: _hf_options, KERAS_HUB: _keras_hub_options, TF1: _tf1_options}
