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

`tokenizer_source(directory)` returns (kind, files, lower_case or None);
`kerasbert.text.load_tokenizer` uses it for directories and hub handles.
"""

import os

from kerasbert.errors import UsageError
from kerasbert.io_utils import json_or_none
from kerasbert.text.families import BPE
from kerasbert.text.families import BPE_MERGES
from kerasbert.text.families import SENTENCEPIECE
from kerasbert.text.families import WORDPIECE
from kerasbert.text.families import resolve_tokenizer_path

#: keras-hub's asset file name -> tokenizer family.
KERAS_HUB_ASSETS = {"vocabulary.txt": WORDPIECE, "vocabulary.spm": SENTENCEPIECE,
                    "vocabulary.json": BPE}


def tokenizer_source(directory):
    """(kind, files, lower_case) of a model directory (see the module
    docstring); lower_case is None where the source does not say. None when
    the directory is none of those layouts (a plain tokenizer directory)."""
    config = json_or_none(os.path.join(directory, "config.json")) or {}
    if "model_type" in config:
        kind, files = resolve_tokenizer_path(directory)
        return kind, files, _hf_lower_case(directory)
    if "registered_name" in config:
        return _keras_hub(directory)
    if "tokenizer" in config or ("vocab" in config and "task_type" in config):
        return None  # a kerasbert run: load_saved_tokenizer reads it
    if os.path.isfile(os.path.join(directory, "bert_config.json")):
        kind, files = resolve_tokenizer_path(os.path.join(directory, "vocab.txt"))
        name = os.path.basename(os.path.normpath(directory)).lower()
        cased = name.startswith("cased") or "_cased" in name or "-cased" in name
        return kind, files, not cased
    if os.path.isfile(os.path.join(directory, "saved_model.pb")):
        return _tf_hub(directory)
    return None


def _hf_lower_case(directory):
    settings = json_or_none(os.path.join(directory, "tokenizer_config.json")) or {}
    if "do_lower_case" in settings:
        return bool(settings["do_lower_case"])
    normalizer = (json_or_none(os.path.join(directory, "tokenizer.json")) or {}).get("normalizer") or {}
    if "lowercase" in normalizer:
        return bool(normalizer["lowercase"])
    return None


def _keras_hub(directory):
    assets = os.path.join(directory, "assets", "tokenizer")
    for name, kind in KERAS_HUB_ASSETS.items():
        path = os.path.join(assets, name)
        if os.path.isfile(path):
            files = (path, os.path.join(assets, BPE_MERGES)) if kind == BPE else (path,)
            if not all(os.path.isfile(f) for f in files):
                raise UsageError(f"{directory}: keras-hub preset without {files[-1]}.")
            settings = (json_or_none(os.path.join(directory, "tokenizer.json")) or {}).get("config", {})
            lower = settings.get("lowercase")
            return kind, files, None if lower is None else bool(lower)
    raise UsageError(f"{directory}: a keras-hub preset without tokenizer assets "
                     f"(assets/tokenizer/{' | '.join(KERAS_HUB_ASSETS)}).")


def _tf_hub(directory):
    assets = os.path.join(directory, "assets")
    names = sorted(os.listdir(assets)) if os.path.isdir(assets) else []
    files = [os.path.join(assets, n) for n in names if n == "vocab.txt" or n.endswith(".model")]
    if not files:
        raise UsageError(f"{directory}: a SavedModel without assets/vocab.txt or a "
                         "SentencePiece model (pass the tokenizer with --vocab).")
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
