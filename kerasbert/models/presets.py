"""The one registry of architecture presets (no weights, nothing downloads).

Each family registers its presets from its own `<family>_presets.py`; every
lookup (Python API, CLI, tests) goes through `get_preset`/`list_presets`.
"""

import difflib

_REGISTRY = {}


def register_presets(backbone_cls, presets):
    """Registers `{name: {"config": {...}, "description": str}}` for a class."""
    for name, preset in presets.items():
        if name in _REGISTRY:
            raise ValueError(f"Preset {name!r} is registered twice.")
        _REGISTRY[name] = dict(preset, backbone_class=backbone_cls)


def list_presets(family=None):
    """Sorted preset names, optionally only those of one backbone class."""
    return sorted(
        name
        for name, preset in _REGISTRY.items()
        if family is None or preset["backbone_class"].__name__ == family
    )


class UnknownPresetError(ValueError):
    pass


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
