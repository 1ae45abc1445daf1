"""A handle, resolved once: where its files are on this machine and what
they are.

    kind        what marks it                                   handle
    preset      a built-in preset name (no files)               bert_base
    hf          config.json with "model_type"                   hf://OWNER/NAME, DIR
    keras_hub   config.json with "registered_name"              kaggle://..., DIR
                (model.weights.h5, tokenizer.json, assets/)
    tf1         bert_config.json + bert_model.ckpt.*            DIR
    tf_hub      saved_model.pb (a TF Hub BERT encoder)          DIR
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
layer uses it; what is built from a source lives in the modules of this
package that sit above the models (`backbones`, `masked_lm`, `generation`).
`Backbone.from_preset` reaches them through `load_backbone`, a door the
package root opens (`install_backbone_loader`): the models layer calls down
into this module, never up.
"""

import dataclasses
import os

from kerasbert.errors import UsageError
from kerasbert.io_utils import json_or_none
from kerasbert.loading import handles
from kerasbert.loading.sentence_transformers import read_sentence_model

PRESET = "preset"
HF = "hf"
KERAS_HUB = "keras_hub"
TF1 = "tf1"
TF_HUB = "tf_hub"
KERAS = "keras"
DIRECTORY = "directory"

#: Kinds that hold published weights in a peer's layout.
PUBLISHED = (HF, KERAS_HUB, TF1, TF_HUB)

TF1_CONFIG = "bert_config.json"


@dataclasses.dataclass(frozen=True)
class Source:
    """What a handle stands for.

    Attributes:
        handle: the handle as the user gave it (for messages).
        kind: one of the kinds of the module docstring.
        path: the local file or directory ("" for a preset).
        config: the parsed config.json (bert_config.json for tf1), or None.
    """

    handle: str
    kind: str
    path: str
    config: dict = None

    @property
    def is_published(self):
        """Weights in a peer's layout (Hugging Face, keras-hub, TF1, TF Hub)."""
        return self.kind in PUBLISHED

    @property
    def model_type(self):
        """The Hugging Face `model_type` ("bert", "roberta", ...), else None."""
        return (self.config or {}).get("model_type") if self.kind == HF else None

    @property
    def sentence_model(self):
        """How a sentence-transformers folder pools its token vectors (a
        `SentenceModel`), or None for any other source."""
        return read_sentence_model(self.path) if self.kind == HF else None

    def file(self, name):
        """Path of `name` inside the source's directory."""
        return os.path.join(self.path, name)


def describe_layouts():
    return ("a Hugging Face model directory (config.json with model_type + safetensors), a "
            "keras-hub preset directory (config.json + model.weights.h5), a google-research/bert "
            "directory (bert_config.json + bert_model.ckpt.*) or a TF Hub BERT encoder SavedModel")


def describe_handles():
    return ("a built-in preset, hf://OWNER/NAME[@REVISION], kaggle://OWNER/MODEL/keras/VARIANT"
            f"[/VERSION], a .keras file, a kerasbert run directory, or {describe_layouts()}")


def detect_layout(path):
    """(kind, parsed config) of a local directory: `HF`, `KERAS_HUB`, `TF1`,
    `TF_HUB`, or `DIRECTORY` when it is none of them."""
    config = json_or_none(os.path.join(path, "config.json"))
    if isinstance(config, dict) and "model_type" in config:
        return HF, config
    if isinstance(config, dict) and "registered_name" in config:
        return KERAS_HUB, config
    if os.path.isfile(os.path.join(path, TF1_CONFIG)):
        return TF1, json_or_none(os.path.join(path, TF1_CONFIG))
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return TF_HUB, None
    return DIRECTORY, config if isinstance(config, dict) else None


def resolve(handle, is_preset=None):
    """The `Source` a handle stands for (downloads a hub handle that is not
    cached).

    Args:
        handle: a preset name, hf://..., kaggle://..., a directory or a
            file (str or path-like), or a `Source` (returned as is).
        is_preset: `name -> bool`, the preset registry's test (the models
            layer passes it; without it no name is a preset).

    Raises:
        UsageError: a malformed or unreachable hub handle, a path that
            does not exist, a file that is not a `.keras` model.
    """
    if isinstance(handle, Source):
        return handle
    handle = os.fspath(handle)
    if is_preset is not None and is_preset(handle):
        return Source(handle, PRESET, "")
    path = handles.local_path(handle)
    if os.path.isfile(path):
        if path.endswith(".keras"):
            return Source(handle, KERAS, path)
        raise UsageError(f"{handle}: a file that is not a .keras model; a handle is "
                         f"{describe_handles()}.")
    kind, config = detect_layout(path)
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
