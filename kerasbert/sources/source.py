"""A handle, resolved once: where its files are on this machine and what
they are.

    kind        what marks it                                   handle
    preset      a built-in preset name (no files)               bert_base
    hf          config.json with "model_type"                   hf://OWNER/NAME, DIR
    keras_hub   config.json with "registered_name"              kaggle://..., DIR
                (model.weights.h5, tokenizer.json, assets/)
    tf1         bert_config.json + bert_model.ckpt.*            DIR
    tf_hub      saved_model.pb (a TF Hub BERT encoder)          DIR
    elmo        *options.json + *weights.hdf5 (allenai/bilm-tf) DIR
    keras       a `.keras` file                                 FILE.keras
    directory   any other directory: a kerasbert run, or a      DIR
                folder of tokenizer files (`kerasbert.runs`
                knows a run's files)

`resolve(handle)` downloads a hub handle through `handles` (once; the
libraries cache it), reads the markers and returns a `Source`. Every caller
that takes a handle (the backbone, task and tokenizer loaders, pretraining's
`--init-from`, generation, fill-mask, export) takes the `Source` instead of
looking at the files again.

This module reads files only (no TensorFlow or Keras), so the tokenizer
layer uses it; what is built from a source lives in `kerasbert.loading`,
above the models (`backbones`, `masked_lm`, `generation`).
`Backbone.from_preset` reaches them through `load_backbone`, a door the
package root opens (`install_backbone_loader`): the models layer calls down
into this module, never up.
"""

import dataclasses
import functools
import itertools
import json
import os
import re

from kerasbert.errors import CheckpointError
from kerasbert.errors import UsageError
from kerasbert.sources import handles
from kerasbert.sources.sentence_transformers import read_sentence_model

PRESET = "preset"
HF = "hf"
KERAS_HUB = "keras_hub"
TF1 = "tf1"
TF_HUB = "tf_hub"
#: allenai/bilm-tf's pair: options.json + weights.hdf5 (`elmo_files`).
ELMO = "elmo"
KERAS = "keras"
DIRECTORY = "directory"

#: Kinds that hold published weights in a peer's layout.
PUBLISHED = (HF, KERAS_HUB, TF1, TF_HUB, ELMO)

TF1_CONFIG = "bert_config.json"

#: What a checkpoint's JSON may be (config.json, bert_config.json, a
#: keras-hub config, a safetensors index): a model config is kilobytes and a
#: few levels deep. Past these limits the file is refused before the parser
#: runs (Python's parser recurses once per level: 100,000 levels overflow it).
MAX_JSON_BYTES = 16 * 2**20
MAX_JSON_DEPTH = 64


class NotJsonError(CheckpointError):
    """A file that is not UTF-8 JSON at all (a syntax error), as opposed to
    JSON past the limits."""


# A JSON string literal, escapes included, removed before brackets are
# counted; an unterminated one runs to the end (so every match succeeds and
# the scan stays linear on hostile text; the parser refuses it later).
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_depth(raw):
    """How deeply the arrays and objects of the JSON text `raw` (bytes)
    nest, counted without parsing (brackets inside strings do not count)."""
    brackets = _JSON_STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _refuse_constant(name):
    raise ValueError(f"{name} is not a JSON number")


def _unique_keys(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"the key {key!r} appears twice")
        seen[key] = value
    return seen


def parse_json(raw, where, max_depth=MAX_JSON_DEPTH):
    """The JSON value of `raw` (bytes) from a file nobody vouches for.

    Refused, naming `where`: nesting deeper than `max_depth` (checked before
    the parser runs), a key repeated in one object (which value counts is
    the reader's guess), NaN or Infinity, and text that is not UTF-8 JSON
    (`NotJsonError`).
    """
    depth = json_depth(raw)
    if depth > max_depth:
        raise CheckpointError(f"{where}: JSON nested {depth} levels deep; a model file "
                              f"needs at most {max_depth}.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise NotJsonError(f"{where}: not UTF-8 text ({err.reason} at byte {err.start}).") \
            from None
    try:
        return json.loads(text, object_pairs_hook=_unique_keys,
                          parse_constant=_refuse_constant)
    except json.JSONDecodeError as err:
        raise NotJsonError(f"{where}: not JSON ({err}).") from None
    except (ValueError, RecursionError) as err:  # a repeated key, NaN, a 5,000-digit number
        raise CheckpointError(f"{where}: {err}.") from None


def read_json_file(path, max_bytes=MAX_JSON_BYTES):
    """`parse_json` of the file at `path`, refused past `max_bytes`
    without reading further.

    Raises:
        CheckpointError (`NotJsonError` for a syntax error), OSError of
        the file itself (missing, unreadable).
    """
    with open(path, "rb") as f:
        raw = f.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise CheckpointError(f"{path}: more than {max_bytes:,} bytes of JSON; a model "
                              "config is a few kilobytes.")
    return parse_json(raw, path)


def _config_or_none(path):
    """A directory's config file parsed, or None when it is missing or not
    JSON (then the directory is something else); JSON past the limits is an
    error."""
    if not os.path.isfile(path):
        return None
    try:
        return read_json_file(path)
    except NotJsonError:
        return None


@dataclasses.dataclass(frozen=True)
class Source:
    """What a handle stands for.

    Attributes:
        handle: the handle as the user gave it (for messages).
        kind: one of the kinds of the module docstring.
        path: the local file or directory ("" for a preset).
        config: the parsed config.json (bert_config.json for tf1), or None.

    Example:

    >>> import json, os, tempfile
    >>> from kerasbert.sources import resolve
    >>> folder = tempfile.mkdtemp()
    >>> resolve(folder).kind                                 # a run, tokenizer files, ...
    'directory'
    >>> with open(os.path.join(folder, "config.json"), "w") as f:
    ...     _ = f.write(json.dumps({"model_type": "bert", "hidden_size": 8}))
    >>> source = resolve(folder)                             # read once: layout and config
    >>> source.kind, source.model_type, source.config["hidden_size"], source.is_published
    ('hf', 'bert', 8, True)
    >>> source.file("vocab.txt") == os.path.join(folder, "vocab.txt")
    True
    """

    handle: str
    kind: str
    path: str
    config: dict = None

    @property
    def is_published(self):
        """Weights in a peer's layout (Hugging Face, keras-hub, TF1, TF Hub,
        ELMo)."""
        return self.kind in PUBLISHED

    @property
    def is_preset(self):
        """A built-in architecture: random weights, no files."""
        return self.kind == PRESET

    @property
    def is_ours(self):
        """What kerasbert saved: a `.keras` file or a directory that is no
        published layout (a run, or tokenizer files)."""
        return self.kind in (KERAS, DIRECTORY)

    @property
    def is_run(self):
        """A directory that is no published layout: a kerasbert run (whose
        files `kerasbert.runs` knows) or a folder of tokenizer files."""
        return self.kind == DIRECTORY

    @property
    def is_remote(self):
        """Named by a hub handle (hf://, kaggle://): `path` is the local
        copy."""
        return handles.is_remote(self.handle)

    @property
    def label(self):
        """What export.json and messages record of the source: a hub handle
        as given, a local file or folder by its name (never an absolute
        path)."""
        return handle_label(self.handle)

    @property
    def model_type(self):
        """The Hugging Face `model_type` ("bert", "roberta", ...), else None."""
        return (self.config or {}).get("model_type") if self.kind == HF else None

    @functools.cached_property
    def sentence_model(self):
        """How a sentence-transformers folder pools its token vectors (a
        `SentenceModel`), or None for any other source (read once)."""
        # its encoder may sit in a subfolder (0_Transformer/), so the root
        # need not be a Hugging Face layout itself
        return read_sentence_model(self.path) if self.kind in (HF, DIRECTORY) else None

    def file(self, name):
        """Path of `name` inside the source's directory."""
        return os.path.join(self.path, name)


def handle_label(handle):
    """A handle as records name it: a hub handle as given, a local file or
    folder by its name (never an absolute path)."""
    handle = os.fspath(handle)
    return handle if handles.is_remote(handle) else os.path.basename(os.path.normpath(handle))


def describe_layouts():
    return ("a Hugging Face model directory (config.json with model_type + safetensors), a "
            "keras-hub preset directory (config.json + model.weights.h5), a google-research/bert "
            "directory (bert_config.json + bert_model.ckpt.*), a TF Hub BERT encoder SavedModel or an "
            "ELMo biLM directory (*options.json + *weights.hdf5, allenai/bilm-tf)")


def describe_handles():
    return ("a built-in preset, hf://OWNER/NAME[@REVISION], kaggle://OWNER/MODEL/keras/VARIANT"
            f"[/VERSION], a .keras file, a kerasbert run directory, or {describe_layouts()}")


def _detect_layout(path):
    """(kind, parsed config) of a local directory: `HF`, `KERAS_HUB`, `TF1`,
    `TF_HUB`, `ELMO` (the config is its options.json), or `DIRECTORY` when it
    is none of them."""
    config = _config_or_none(os.path.join(path, "config.json"))
    if isinstance(config, dict) and "model_type" in config:
        return HF, config
    if isinstance(config, dict) and "registered_name" in config:
        return KERAS_HUB, config
    if os.path.isfile(os.path.join(path, TF1_CONFIG)):
        return TF1, _config_or_none(os.path.join(path, TF1_CONFIG))
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return TF_HUB, None
    if elmo_files(path):
        return ELMO, _config_or_none(elmo_files(path)[0])
    return DIRECTORY, config if isinstance(config, dict) else None


def elmo_files(path):
    """(options path, weights path) of an ELMo biLM directory: `options.json`
    and `weights.hdf5`, or the one `*options.json` and the one
    `*weights.hdf5` it holds (AllenNLP's names:
    elmo_2x4096_512_2048cnn_2xhighway_options.json, ..._weights.hdf5);
    None when it is not one."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return None
    options = [n for n in names if n.endswith("options.json")]
    weights = [n for n in names if n.endswith("weights.hdf5")]
    if "options.json" in names and "weights.hdf5" in names:
        pair = ("options.json", "weights.hdf5")
    elif len(options) == 1 and len(weights) == 1:
        pair = (options[0], weights[0])
    else:
        return None
    paths = tuple(os.path.join(path, name) for name in pair)
    return paths if all(os.path.isfile(p) for p in paths) else None


def resolve(handle, presets=None):
    """The `Source` a handle stands for (downloads a hub handle that is not
    cached). The one place a handle is read: every caller passes the
    `Source` on.

    Args:
        handle: a preset name, hf://..., kaggle://..., a directory or a
            file (str or path-like), or a `Source` (returned as is).
        presets: the preset registry (`kerasbert.models.presets`: its
            `is_preset(name)` and `get_preset(name)`); the models layer and
            the loaders pass it. Without it no name is a preset.

    Raises:
        UsageError: a malformed or unreachable hub handle, a path that
            does not exist, a bare name that is no preset (the registry's
            error lists the close names), a file that is not a `.keras`
            model.
    """
    if isinstance(handle, Source):
        return handle
    handle = os.fspath(handle)
    if presets is not None and presets.is_preset(handle):
        return Source(handle, PRESET, "")
    if (presets is not None and os.sep not in handle and not handles.is_remote(handle)
            and not os.path.exists(handle)):
        presets.get_preset(handle)  # an unknown name: its error lists the close ones
    path = handles.local_path(handle)
    if os.path.isfile(path):
        if path.endswith(".keras"):
            return Source(handle, KERAS, path)
        raise UsageError(f"{handle}: a file that is not a .keras model; a handle is "
                         f"{describe_handles()}.")
    kind, config = _detect_layout(path)
    return Source(handle, kind, path, config)


# --- the door to the loaders above the models (see the module docstring) ---

_BACKBONE_LOADER = []


def install_backbone_loader(loader):
    """Sets `loader(handle, dtype=None, **overrides) -> Backbone`, the one
    function that builds a backbone from any handle (the package root
    installs `kerasbert.loading.backbones.load_backbone`)."""
    _BACKBONE_LOADER[:] = [loader]


def load_backbone(handle, dtype=None, **overrides):
    """The backbone a handle stands for, through the installed loader."""
    if not _BACKBONE_LOADER:
        raise UsageError(f"{handle!r}: no loader of published weights is installed "
                         "(import kerasbert first).")
    return _BACKBONE_LOADER[0](handle, dtype=dtype, **overrides)
