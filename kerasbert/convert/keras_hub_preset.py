"""A keras-hub preset directory -> our backbone, reading `model.weights.h5`
straight into our variables (one tensor at a time; keras-hub's model is never
built at full size).

Where each weight sits in the HDF5 file follows from keras-hub's object
structure (datasets such as `layers/transformer_encoder_3/_self_attention_
layer/query_dense/vars/0`), which depends on the family and the number of
layers, not on the sizes. So the same keras-hub class is built *tiny* (same
layer counts, widths of 2), each of its variables is filled with its own
index, and `save_weights` shows which dataset holds which variable. A
stand-in of the full-size peer then answers what the family converters ask
(`from_keras_hub`: the configuration and, through `keras_hub_layout`'s
attribute paths, the variables), with HDF5 datasets as its variables.
"""

import json
import os
import tempfile
import types

import numpy as np

from kerasbert.convert.keras_hub import from_keras_hub
from kerasbert.errors import UsageError

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


def _tiny_peer(cls, config):
    tiny = {k: v for k, v in config.items() if k not in ("name", "trainable", "dtype")}
    tiny.update({k: v for k, v in _TINY.items() if k in tiny})
    tiny["hidden_dim"] = 2 * tiny.get("num_heads", 1)  # 2 per head
    return cls(**tiny)


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


def _stand_in(node, datasets, h5file, seen):
    """A copy of the tiny peer's attribute tree (the parts the layout
    tables walk) whose variables are full-size HDF5 datasets."""
    if id(node) in datasets:
        return _Dataset(h5file, datasets[id(node)])
    if isinstance(node, (list, tuple)):
        return [_stand_in(x, datasets, h5file, seen) for x in node]
    if id(node) in seen:
        return seen[id(node)]
    if not hasattr(node, "__dict__"):
        return None
    copy = types.SimpleNamespace()
    seen[id(node)] = copy
    for name, value in vars(node).items():
        if isinstance(value, (list, tuple)) or hasattr(value, "weights") or id(value) in datasets:
            setattr(copy, name, _stand_in(value, datasets, h5file, seen))
    for name in ("kernel", "bias", "gamma", "beta", "embeddings", "position_embeddings"):
        value = getattr(node, name, None)
        if value is not None and id(value) in datasets:
            setattr(copy, name, _Dataset(h5file, datasets[id(value)]))
    return copy


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

    with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
        spec = json.load(f)
    class_name = spec.get("registered_name", "").split(">")[-1]
    cls = getattr(keras_hub.models, class_name, None)
    if cls is None:
        raise UsageError(f"{path}: keras-hub has no {class_name!r}.")
    config = spec["config"]
    tiny = _tiny_peer(cls, config)
    datasets = _dataset_of_each_variable(tiny)
    with h5py.File(os.path.join(path, "model.weights.h5"), "r") as h5file:
        missing = [name for name in datasets.values() if name not in h5file]
        if missing:
            raise UsageError(f"{path}/model.weights.h5 has no {missing[0]} (not the weights of "
                             f"this {class_name} configuration).")
        peer = object.__new__(cls)  # passes the converters' isinstance checks; no weights
        tree = _stand_in(tiny, datasets, h5file, {})
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
