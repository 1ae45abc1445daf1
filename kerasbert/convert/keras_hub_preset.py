"""A keras-hub preset directory -> our backbone, reading `model.weights.h5`
straight into our variables (one tensor at a time; keras-hub's model is never
built at full size).

Where each weight sits in the HDF5 file follows from keras-hub's object
structure (datasets such as `layers/transformer_encoder_3/_self_attention_
layer/query_dense/vars/0`), which depends on the family and the number of
layers, not on the sizes. So the same keras-hub class is built *tiny* (same
layer counts, widths of 2), each of its variables is filled with its own
index, and `save_weights` shows which dataset holds which variable; that
layout is kept in kerasbert's cache, so the probe runs once per keras-hub
version and structure (`preset_layout`). A stand-in of the full-size peer
then answers what the family converters ask (`from_keras_hub`: the
configuration and, through `keras_hub_layout`'s attribute paths, the
variables), with HDF5 datasets as its variables.
"""

import hashlib
import json
import os
import sys
import tempfile
import types

import numpy as np

from kerasbert import models
from kerasbert.convert.keras_hub import from_keras_hub
from kerasbert.errors import CheckpointError
from kerasbert.errors import UsageError
from kerasbert.io_utils import atomic_write_text
from kerasbert.io_utils import cache_dir
from kerasbert.io_utils import json_or_none
from kerasbert.layers.initializers import loads_checkpoint
from kerasbert.sources.source import read_json_file
from kerasbert.models.config_checks import check_stored_parameters
from kerasbert.models.config_checks import stored_config_arguments

#: constructor arguments that are sizes, and the tiny value the probe uses
_TINY = {"vocabulary_size": 8, "vocab_size": 8, "hidden_dim": 4, "intermediate_dim": 4,
         "embedding_dim": 2, "max_sequence_length": 4}


class _Dataset:
    """A full-size weight in the preset's HDF5 file, read on use (the
    `.numpy()` / `.shape` that `keras_hub_layout.VariableView` reads)."""

    def __init__(self, h5file, name):
        self.h5file, self.name = h5file, name
        self.shape = tuple(h5file[name].shape)

    transposed = False

    @property
    def nbytes(self):
        return self.h5file[self.name].nbytes

    def numpy(self):
        return np.asarray(self.h5file[self.name][()])

    def rows(self, start, stop):
        return np.asarray(self.h5file[self.name][start:stop])


def _tiny_config(config):
    """The preset's constructor arguments with every size made tiny (2 per
    head): the same structure, hence the same HDF5 dataset names."""
    tiny = {k: v for k, v in config.items() if k not in ("name", "trainable", "dtype")}
    tiny.update({k: v for k, v in _TINY.items() if k in tiny})
    tiny["hidden_dim"] = 2 * tiny.get("num_heads", 1)  # 2 per head
    return tiny


def _dataset_of_each_variable(peer):
    """{id(tiny variable): HDF5 dataset name}, found by saving the tiny
    peer with every variable set to its own index."""
    import h5py  # lazy: keras' HDF5 reader, only for this source

    for index, variable in enumerate(peer.weights):
        variable.assign(np.full(tuple(variable.shape), index + 1, variable.dtype))
    by_index = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "probe.weights.h5")
        peer.save_weights(path)
        with h5py.File(path, "r") as f:
            def visit(name, obj):
                if isinstance(obj, h5py.Dataset) and obj.size:
                    by_index[int(np.asarray(obj[()]).flat[0]) - 1] = name
            f.visititems(visit)
    return {id(v): by_index[i] for i, v in enumerate(peer.weights) if i in by_index}


def _describe(node, datasets, seen):
    """The parts of the tiny peer's attribute tree the layout tables walk,
    as JSON: {"h5": dataset} for a variable, a list, {"attrs": {...},
    "id": n} for an object ({"ref": n} when met again), or None."""
    if id(node) in datasets:
        return {"h5": datasets[id(node)]}
    if isinstance(node, (list, tuple)):
        return [_describe(x, datasets, seen) for x in node]
    if id(node) in seen:
        return {"ref": seen[id(node)]}
    if not hasattr(node, "__dict__"):
        return None
    seen[id(node)] = len(seen)
    attrs = {}
    for name, value in vars(node).items():
        if isinstance(value, (list, tuple)) or hasattr(value, "weights") or id(value) in datasets:
            attrs[name] = _describe(value, datasets, seen)
    for name in ("kernel", "bias", "gamma", "beta", "embeddings", "position_embeddings"):
        value = getattr(node, name, None)
        if value is not None and id(value) in datasets:
            attrs[name] = {"h5": datasets[id(value)]}
    return {"id": seen[id(node)], "attrs": attrs}


def _stand_in(layout, h5file, built):
    """The described tree with full-size HDF5 datasets as its variables."""
    if isinstance(layout, list):
        return [_stand_in(x, h5file, built) for x in layout]
    if not isinstance(layout, dict):
        return None
    if "h5" in layout:
        return _Dataset(h5file, layout["h5"])
    if "ref" in layout:
        return built[layout["ref"]]
    copy = built[layout["id"]] = types.SimpleNamespace()
    for name, value in layout["attrs"].items():
        setattr(copy, name, _stand_in(value, h5file, built))
    return copy


def _datasets_named(layout):
    if isinstance(layout, list):
        return [name for x in layout for name in _datasets_named(x)]
    if not isinstance(layout, dict):
        return []
    if "h5" in layout:
        return [layout["h5"]]
    return [name for x in layout.get("attrs", {}).values() for name in _datasets_named(x)]


def preset_layout(cls, config):
    """Where a keras-hub class of this configuration keeps each weight
    (`_describe`'s tree): probed once with a tiny peer (about 1.7 s for a
    12-layer BERT on two cores), then read from kerasbert's cache, keyed by
    the keras-hub version, the class and the structural configuration."""
    import keras_hub  # lazy: the peer's classes give the file's structure

    tiny = _tiny_config(config)
    key = json.dumps([keras_hub.__version__, cls.__name__, tiny], sort_keys=True, default=str)
    path = cache_dir("keras_hub_layouts", hashlib.sha256(key.encode()).hexdigest()[:24] + ".json")
    cached = json_or_none(path)
    if isinstance(cached, dict) and cached.get("key") == key:
        return cached["layout"]
    peer = cls(**tiny)
    layout = _describe(peer, _dataset_of_each_variable(peer), {})
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write_text(path, json.dumps({"key": key, "layout": layout}))
    except OSError as err:  # a read-only cache: the load goes on, the next one probes again
        print(f"note: kerasbert cache not written ({err}); keras-hub layouts are probed "
              "on every load.", file=sys.stderr)
    return layout


def _check_declared_size(path, class_name, config, h5file):
    """Before the tiny probe (which has the preset's layer count) or our
    model is built: the preset's sizes are values a model can have (our
    family's `validate_config`), the parameters they declare are stored in
    model.weights.h5 (a published preset stores its weights) and fit the
    memory budget.

    Raises:
        CheckpointError: naming the file, the value or both counts.
    """
    ours = getattr(models, class_name, None)
    if ours is None:
        return  # not a family of ours: `from_keras_hub` names the ones it converts
    # keras-hub's ELECTRA says vocab_size; every other name is ours.
    config = {("vocabulary_size" if k == "vocab_size" else k): v for k, v in config.items()}
    missing = [k for k in ("vocabulary_size", "num_layers", "num_heads", "hidden_dim",
                           "intermediate_dim") if k not in config]
    if missing:
        raise CheckpointError(f"{path}/config.json: {class_name} without {missing[0]!r}.")
    arguments = stored_config_arguments(ours, config, f"{path}/config.json: ")
    check_stored_parameters(ours, arguments, _stored_values(h5file), f"{path}/config.json: ",
                            "model.weights.h5 stores")


def _stored_values(h5file):
    """How many values the datasets of an HDF5 file hold (metadata only)."""
    import h5py  # lazy: keras' HDF5 reader

    sizes = []
    h5file.visititems(lambda _, obj: sizes.append(obj.size)
                      if isinstance(obj, h5py.Dataset) else None)
    return sum(sizes)


@loads_checkpoint
def from_keras_hub_preset(path):
    """Our backbone from a keras-hub preset directory (config.json +
    model.weights.h5), streamed (see the module docstring).

    Raises:
        UsageError: a class keras-hub does not have, or a weights file that
            does not fit the configuration.
    """
    import h5py  # lazy: keras' HDF5 reader
    import keras  # lazy: keras
    import keras_hub  # lazy: the peer's classes give the file's structure

    spec = read_json_file(os.path.join(path, "config.json"))
    name = spec.get("registered_name") if isinstance(spec, dict) else None
    class_name = name.split(">")[-1] if isinstance(name, str) else ""
    cls = getattr(keras_hub.models, class_name, None) if class_name.isidentifier() else None
    if cls is None:
        raise UsageError(f"{path}: keras-hub has no {class_name or name!r}.")
    config = spec.get("config")
    if not isinstance(config, dict):
        raise UsageError(f"{path}/config.json: \"config\" is not an object of {class_name}'s "
                         "arguments.")
    weights_path = os.path.join(path, "model.weights.h5")
    try:
        h5file = h5py.File(weights_path, "r")
    except OSError as err:
        raise UsageError(f"{weights_path}: not a readable HDF5 weights file ({err}).") from None
    with h5file:
        _check_declared_size(path, class_name, config, h5file)
        # The tiny probe has the preset's structure: checked sizes first.
        layout = preset_layout(cls, config)
        missing = [name for name in _datasets_named(layout) if name not in h5file]
        if missing:
            raise UsageError(f"{path}/model.weights.h5 has no {missing[0]} (not the weights of "
                             f"this {class_name} configuration).")
        peer = object.__new__(cls)  # passes the converters' isinstance checks; no weights
        tree = _stand_in(layout, h5file, {})
        for name, value in vars(tree).items():
            object.__setattr__(peer, name, value)
        for name, value in config.items():
            if name not in ("name", "trainable", "dtype"):
                object.__setattr__(peer, name, value)
        object.__setattr__(peer, "_dtype_policy", keras.dtype_policies.get(
            keras.saving.deserialize_keras_object(config.get("dtype")) or "float32"))
        try:
            return from_keras_hub(peer)
        except (ValueError, KeyError) as err:
            raise UsageError(f"{path}: {err}") from None
