"""A sentence-transformers folder: how it turns token vectors into one
sentence vector.

A model saved by the `sentence-transformers` library is a Hugging Face model
folder (config.json, model.safetensors, tokenizer files) plus three files
that say what happens after the encoder:

    modules.json                 the modules run in order: Transformer,
                                 Pooling, optionally Normalize
    1_Pooling/config.json        the `pooling_mode_*` switches and
                                 `word_embedding_dimension`
    sentence_bert_config.json    `max_seq_length` (the packed length,
                                 special tokens included) and
                                 `do_lower_case`

`read_sentence_model(directory)` reads them into a `SentenceModel`, or
returns None for a folder without modules.json (not a sentence model). Files
only: no TensorFlow or Keras here, so the handle resolver can call it.

Only what we compute exactly is accepted: the Transformer, Pooling with
the CLS, max, mean and mean-sqrt-length modes (several modes concatenate in
the library's order: cls, max, mean, mean_sqrt_len), and Normalize. Any
other module (Dense, LayerNorm, ...) or pooling mode (weightedmean,
lasttoken) is a `UsageError` naming the file and the field, never a silently
different vector.
"""

import dataclasses
import json
import os

from kerasbert.errors import UsageError

MODULES_FILE = "modules.json"
SENTENCE_CONFIG_FILE = "sentence_bert_config.json"
POOLING_CONFIG_FILE = "config.json"

#: Pooling modes we compute, in the order sentence-transformers concatenates
#: them when several are on.
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len")

# 1_Pooling/config.json key -> our mode name (None: a mode we refuse).
_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
    "pooling_mode_weightedmean_tokens": None,
    "pooling_mode_lasttoken": None,
}
# The library's `pooling_mode` string (its constructor argument) -> ours.
_POOLING_NAMES = {"cls": "cls", "max": "max", "mean": "mean",
                  "mean_sqrt_len_tokens": "mean_sqrt_len",
                  "weightedmean": None, "lasttoken": None}

# The module classes, by the last part of the dotted `type` in modules.json
# (the library has written them as `sentence_transformers.models.Pooling`
# and, since its package split, under `sentence_transformers.base.models` /
# `sentence_transformers.sentence_transformer.models`).
TRANSFORMER, POOLING, NORMALIZE = "Transformer", "Pooling", "Normalize"


@dataclasses.dataclass(frozen=True)
class SentenceModel:
    """What a sentence-transformers folder does after the encoder.

    Attributes:
        path: the folder.
        pooling: the pooling modes (a tuple of `POOLING_MODES` names, in
            concatenation order; usually one).
        normalize: the vectors are L2-normalised (a Normalize module).
        max_seq_length: the packed length T (special tokens included), or
            None when sentence_bert_config.json does not state it.
        do_lower_case: sentence-transformers lower-cases the text before
            the tokenizer (on top of the tokenizer's own setting).
        embedding_dim: the encoder's width (`word_embedding_dimension`).
        transformer_path: the Transformer module's folder inside `path`
            ("" = `path` itself; older saves use "0_Transformer").

    Example:

    >>> import json, os, tempfile
    >>> from kerasbert.sources import read_sentence_model
    >>> folder = tempfile.mkdtemp()
    >>> kinds = ("Transformer", "Pooling", "Normalize")
    >>> modules = [{"idx": i, "name": str(i), "path": path,
    ...             "type": "sentence_transformers.models." + kind}
    ...            for i, (path, kind) in enumerate(zip(("", "1_Pooling", "2_Normalize"), kinds))]
    >>> os.makedirs(os.path.join(folder, "1_Pooling"))
    >>> with open(os.path.join(folder, "modules.json"), "w") as f:
    ...     json.dump(modules, f)
    >>> with open(os.path.join(folder, "1_Pooling", "config.json"), "w") as f:
    ...     json.dump({"word_embedding_dimension": 8, "pooling_mode_mean_tokens": True}, f)
    >>> model = read_sentence_model(folder)
    >>> model.pooling, model.normalize, model.embedding_dim, model.max_seq_length
    (('mean',), True, 8, None)
    """

    path: str
    pooling: tuple
    normalize: bool
    max_seq_length: int = None
    do_lower_case: bool = False
    embedding_dim: int = None
    transformer_path: str = ""

    @property
    def output_dim(self):
        """Width of a sentence vector: embedding_dim per pooling mode."""
        return None if self.embedding_dim is None else self.embedding_dim * len(self.pooling)

    @property
    def encoder_path(self):
        """The directory holding the encoder's config.json and weights."""
        return os.path.join(self.path, self.transformer_path) if self.transformer_path else self.path


def is_sentence_model(directory):
    """True when `directory` holds a modules.json (a sentence-transformers
    folder)."""
    return os.path.isfile(os.path.join(os.fspath(directory), MODULES_FILE))


# These files are a few hundred bytes; a larger one is not a module list.
_MAX_JSON_BYTES = 2**20


def _read_json(path, expect=dict):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(_MAX_JSON_BYTES + 1)
        if len(text) > _MAX_JSON_BYTES:
            raise UsageError(f"{path}: more than {_MAX_JSON_BYTES:,} characters; not a "
                             "sentence-transformers file.")
        value = json.loads(text)
    except FileNotFoundError:
        raise UsageError(f"{path}: missing (a sentence-transformers folder needs it).") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:  # JSONDecodeError too
        raise UsageError(f"{path}: not a readable JSON file ({error}).") from None
    except RecursionError:
        raise UsageError(f"{path}: JSON nested too deeply to be a sentence-transformers "
                         "file.") from None
    if not isinstance(value, expect):
        raise UsageError(f"{path}: expected a JSON {'object' if expect is dict else 'list'}, "
                         f"got {type(value).__name__}.")
    return value


def _module_kind(entry, index, path):
    if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
        raise UsageError(f"{path}: entry {index} has no \"type\" string (got {entry!r}).")
    kind = entry["type"]
    if kind.split(".")[0] == "sentence_transformers" and kind.split(".")[-1] in (
            TRANSFORMER, POOLING, NORMALIZE):
        return kind.split(".")[-1]
    raise UsageError(
        f"{path}: module {index} has \"type\": {kind!r}, which kerasbert does not compute "
        f"(supported: sentence_transformers.models.{TRANSFORMER}, .{POOLING}, .{NORMALIZE}).")


def _module_path(entry, index, path):
    sub = entry.get("path", "")
    if not isinstance(sub, str) or os.path.isabs(sub) or ".." in sub.replace("\\", "/").split("/"):
        raise UsageError(f"{path}: module {index} has \"path\": {sub!r}; expected a folder "
                         "inside the model folder.")
    return sub


def _pooling_modes(config, path):
    if config.get("pooling_mode") is not None:
        name = config["pooling_mode"]
        if not isinstance(name, str) or name.lower() not in _POOLING_NAMES:
            raise UsageError(f"{path}: \"pooling_mode\": {name!r} is not a pooling mode "
                             f"(known: {', '.join(_POOLING_NAMES)}).")
        mode = _POOLING_NAMES[name.lower()]
        if mode is None:
            raise UsageError(f"{path}: \"pooling_mode\": {name!r} is not supported by kerasbert "
                             f"(supported: {', '.join(POOLING_MODES)}).")
        return (mode,)
    unknown = sorted(key for key in config if key.startswith("pooling_mode_")
                     and key not in _POOLING_KEYS)
    if unknown:
        raise UsageError(f"{path}: \"{unknown[0]}\" is no pooling switch sentence-transformers "
                         f"defines (known: {', '.join(_POOLING_KEYS)}).")
    modes = set()
    for key, mode in _POOLING_KEYS.items():
        # A missing key takes the library's default: mean on, the rest off.
        value = config.get(key, mode == "mean")
        if not isinstance(value, bool):
            raise UsageError(f"{path}: \"{key}\" must be true or false, got {value!r}.")
        if value and mode is None:
            raise UsageError(f"{path}: \"{key}\": true is a pooling mode kerasbert does not "
                             f"compute (supported: {', '.join(POOLING_MODES)}).")
        if value:
            modes.add(mode)
    if not modes:
        raise UsageError(f"{path}: no pooling mode is on (set one of "
                         f"{', '.join(k for k, m in _POOLING_KEYS.items() if m)} to true).")
    return tuple(mode for mode in POOLING_MODES if mode in modes)


def _positive_int(value, path, key, allow_none=True):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{path}: \"{key}\" must be a positive integer, got {value!r}.")
    return value


def read_sentence_model(directory):
    """The `SentenceModel` of a sentence-transformers folder, or None when
    `directory` has no modules.json (any other model folder).

    Args:
        directory: a local directory (str or path-like).

    Raises:
        UsageError: a malformed file, a module other than Transformer,
            Pooling and Normalize (or in another order), or a pooling mode
            we do not compute; the message names the file and the field.
    """
    directory = os.fspath(directory)
    if not is_sentence_model(directory):
        return None
    modules_file = os.path.join(directory, MODULES_FILE)
    modules = _read_json(modules_file, expect=list)
    kinds = [(_module_kind(entry, i, modules_file), _module_path(entry, i, modules_file))
             for i, entry in enumerate(modules)]
    names = [kind for kind, _ in kinds]
    # What we compute: encoder -> pooling -> (normalize). Anything else
    # (two poolings, normalize before pooling) would mean another vector.
    if names not in ([TRANSFORMER, POOLING], [TRANSFORMER, POOLING, NORMALIZE]):
        raise UsageError(f"{modules_file}: modules {' -> '.join(names) or '(none)'}; kerasbert "
                         f"computes {TRANSFORMER} -> {POOLING} (-> {NORMALIZE}).")
    transformer_path, pooling_path = kinds[0][1], kinds[1][1]

    pooling_file = os.path.join(directory, pooling_path, POOLING_CONFIG_FILE)
    pooling_config = _read_json(pooling_file)
    pooling = _pooling_modes(pooling_config, pooling_file)
    embedding_dim = _positive_int(pooling_config.get("word_embedding_dimension"), pooling_file,
                                  "word_embedding_dimension")

    # sentence_bert_config.json sits in the Transformer module's folder.
    # sentence-transformers itself falls back to the tokenizer's limit when
    # it is missing, so a folder without it still loads.
    sentence_file = os.path.join(directory, transformer_path, SENTENCE_CONFIG_FILE)
    sentence_config = _read_json(sentence_file) if os.path.exists(sentence_file) else {}
    max_seq_length = _positive_int(sentence_config.get("max_seq_length"), sentence_file,
                                   "max_seq_length")
    do_lower_case = sentence_config.get("do_lower_case", False)
    if not isinstance(do_lower_case, bool):
        raise UsageError(f"{sentence_file}: \"do_lower_case\" must be true or false, "
                         f"got {do_lower_case!r}.")
    return SentenceModel(path=directory, pooling=pooling, normalize=names[-1] == NORMALIZE,
                         max_seq_length=max_seq_length, do_lower_case=do_lower_case,
                         embedding_dim=embedding_dim, transformer_path=transformer_path)
