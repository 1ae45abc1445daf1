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

import os

from kerasbert.errors import UsageError
from kerasbert.io_utils import json_or_none
from kerasbert.sources.source import HF
from kerasbert.sources.source import KERAS_HUB
from kerasbert.sources.source import TF1
from kerasbert.sources.source import TF_HUB
from kerasbert.text.families import BPE
from kerasbert.text.families import BPE_MERGES
from kerasbert.text.families import SENTENCEPIECE
from kerasbert.text.families import WORDPIECE
from kerasbert.text.tokenizer_paths import resolve_tokenizer_path
from kerasbert.text.tokenizer_paths import tokenizer_json_of
from kerasbert.text import hf_tokenizer_files
from kerasbert.text.tokenizer_json_files import tokenizer_json_settings

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
    kind, files = resolve_tokenizer_path(directory)  # its tokenizer.json where it has no other
    tokenizer_json = tokenizer_json_of(directory)
    if tokenizer_json is not None:  # the file states its casing (as a bare one does)
        return kind, files, tokenizer_json_settings(tokenizer_json, kind)[1]
    return kind, files, _hf_lower_case(directory, source.model_type)


def _tf1(source):
    kind, files = resolve_tokenizer_path(os.path.join(source.path, "vocab.txt"))
    name = os.path.basename(os.path.normpath(source.path)).lower()
    cased = name.startswith("cased") or "_cased" in name or "-cased" in name
    return kind, files, not cased


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
    tokenizer_json = tokenizer_json_of(directory)
    if tokenizer_json is not None:
        return tokenizer_json_settings(tokenizer_json, kind)[0]
    return hf_tokenizer_files.tokenizer_options(
        kind, os.path.join(directory, hf_tokenizer_files.TOKENIZER_JSON),
        os.path.join(directory, hf_tokenizer_files.TOKENIZER_CONFIG))


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
