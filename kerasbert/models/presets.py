"""The one registry of architecture presets (no weights, nothing downloads),
and the door to published weights.

Each family registers its presets from its own `<family>_presets.py`; every
lookup (Python API, CLI, tests) goes through `get_preset`/`list_presets`.

A name that is not a preset is a handle to weights (hf://, kaggle://, a
local directory or `.keras` file). Loading those needs layers above this one
(convert, saving); `kerasbert.sources.source.load_backbone` is the door to
them, which the package root opens when `kerasbert` is imported (see
kerasbert/__init__.py), so this layer only calls down.
"""

import ast
import difflib
import re

from kerasbert.errors import UsageError
from kerasbert.sources import source

_REGISTRY = {}


def register_presets(backbone_cls, presets):
    """Registers `{name: {"config": {...}, "description": str}}` for a class."""
    for name, preset in presets.items():
        if name in _REGISTRY:
            raise ValueError(f"Preset {name!r} is registered twice.")
        _REGISTRY[name] = dict(preset, backbone_class=backbone_cls)


def family_of(backbone_cls):
    """"BertBackbone" -> "bert", "DistilBertBackbone" -> "distil_bert"."""
    name = backbone_cls.__name__.removesuffix("Backbone")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def list_presets(family=None):
    """Preset names grouped by family (families in registration order, BERT
    first; names sorted within each). `family` ("bert", "roberta", ... or a
    class name like "BertBackbone") keeps one family."""
    names = []
    for fam, members in presets_by_family().items():
        if family is None or family in (fam, _class_name(fam)):
            names.extend(members)
    return names


def presets_by_family():
    """{family: sorted preset names}, families in registration order."""
    groups = {}
    for name, preset in _REGISTRY.items():
        groups.setdefault(family_of(preset["backbone_class"]), []).append(name)
    return {fam: sorted(members) for fam, members in groups.items()}


def _class_name(family):
    for preset in _REGISTRY.values():
        if family_of(preset["backbone_class"]) == family:
            return preset["backbone_class"].__name__
    return None


class UnknownPresetError(UsageError, ValueError):
    """A name that is neither a preset nor a handle (the message lists the
    close names).

    Example:

    >>> from kerasbert.models import get_preset
    >>> get_preset("bert_huge")
    Traceback (most recent call last):
    ...
    kerasbert.models.presets.UnknownPresetError: Unknown preset 'bert_huge'. Did you mean ...
    >>> get_preset("bert_tiny")["config"]["num_layers"]
    2
    """


def load_from_source(handle, **overrides):
    """The backbone a handle to weights stands for (`kerasbert.loading`)."""
    return source.load_backbone(handle, **overrides)


def is_preset(name):
    return isinstance(name, str) and name in _REGISTRY


def get_preset(name):
    """Returns the preset dict; unknown names raise with the valid names."""
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise UnknownPresetError(
            f"Unknown preset {name!r}.{hint} Valid presets: "
            f"{', '.join(list_presets())}."
        )
    return _REGISTRY[name]


def parse_overrides(pairs):
    """["num_layers=4", "dropout=0.0"] -> {"num_layers": 4, "dropout": 0.0}
    (the values of `--set KEY=VALUE`)."""
    overrides = {}
    for pair in pairs or ():
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"Override {pair!r} is not KEY=VALUE.")
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw  # Plain strings need no quotes: activation=relu.
        overrides[key.strip()] = value
    return overrides


def build_backbone(name, overrides):
    """Builds preset `name` with `overrides`; an unknown name or a value the
    family refuses is a UsageError (one line at the command line)."""
    try:
        return get_preset(name)["backbone_class"].from_preset(name, **overrides)
    except (ValueError, TypeError) as err:
        raise UsageError(str(err)) from None
