"""Where keras-hub keeps each weight of its encoder backbones, as tables.

One table per keras-hub class maps the canonical keys of
`kerasbert.convert.bert_weights` to attribute paths on the keras-hub
backbone; one table maps a block's keys to paths on its
`TransformerEncoder` (every encoder family of keras-hub shares that block).
`read_keras_hub` and `write_keras_hub` walk them; the family modules add only
what is their own (configuration, position tables); `require_exact`
refuses what keras-hub would compute differently.

keras-hub stores attention kernels per head ([H, N, D] and [N, D, H]); the
canonical layout is 2-D [in, out] / 1-D, so those tensors are reshaped on the
way in and out (`canonical_shape`).
"""

import math

import numpy as np

from kerasbert.convert.bert_weights import _assign

_EMBEDDINGS = {
    "word_embeddings": "token_embedding.embeddings",
    "position_embeddings": "position_embedding.position_embeddings",
    "embeddings_ln_gamma": "embeddings_layer_norm.gamma",
    "embeddings_ln_beta": "embeddings_layer_norm.beta",
}
_SEGMENTS = {"type_embeddings": "segment_embedding.embeddings"}
_POOLER = {"pooler_kernel": "pooled_dense.kernel", "pooler_bias": "pooled_dense.bias"}
# ALBERT always projects; ELECTRA only when embedding_dim != hidden_dim (the
# attribute is then None and the keys are skipped).
_PROJECTION = {
    "embedding_projection_kernel": "embeddings_projection.kernel",
    "embedding_projection_bias": "embeddings_projection.bias",
}

#: keras-hub class name -> {canonical key: attribute path} outside the blocks.
TOP = {
    "BertBackbone": {**_EMBEDDINGS, **_SEGMENTS, **_POOLER},
    "AlbertBackbone": {**_EMBEDDINGS, **_SEGMENTS, **_POOLER, **_PROJECTION},
    "ElectraBackbone": {**_EMBEDDINGS, **_SEGMENTS, **_POOLER, **_PROJECTION},
    "RobertaBackbone": {
        **_EMBEDDINGS,
        "position_embeddings": "embeddings.position_embedding.position_embeddings",
    },
    "DistilBertBackbone": {
        **_EMBEDDINGS,
        "word_embeddings": "embeddings.token_embedding.embeddings",
        "position_embeddings": "embeddings.position_embedding.position_embeddings",
    },
}

#: {canonical layer key: attribute path} on a keras-hub `TransformerEncoder`.
BLOCK = {
    "query_kernel": "_self_attention_layer._query_dense.kernel",
    "query_bias": "_self_attention_layer._query_dense.bias",
    "key_kernel": "_self_attention_layer._key_dense.kernel",
    "key_bias": "_self_attention_layer._key_dense.bias",
    "value_kernel": "_self_attention_layer._value_dense.kernel",
    "value_bias": "_self_attention_layer._value_dense.bias",
    "attention_output_kernel": "_self_attention_layer._output_dense.kernel",
    "attention_output_bias": "_self_attention_layer._output_dense.bias",
    "attention_ln_gamma": "_self_attention_layer_norm.gamma",
    "attention_ln_beta": "_self_attention_layer_norm.beta",
    "intermediate_kernel": "_feedforward_intermediate_dense.kernel",
    "intermediate_bias": "_feedforward_intermediate_dense.bias",
    "output_kernel": "_feedforward_output_dense.kernel",
    "output_bias": "_feedforward_output_dense.bias",
    "output_ln_gamma": "_feedforward_layer_norm.gamma",
    "output_ln_beta": "_feedforward_layer_norm.beta",
}


def _resolve(obj, path):
    for name in path.split("."):
        obj = getattr(obj, name, None)
        if obj is None:
            return None
    return obj


def variables(obj, table):
    """(canonical key, variable) for every path of `table` that `obj` has."""
    pairs = ((key, _resolve(obj, path)) for key, path in table.items())
    return [(key, variable) for key, variable in pairs if variable is not None]


def require(peer, class_name):
    """A clear TypeError unless `peer` is `keras_hub.models.<class_name>`."""
    import keras_hub  # lazy: optional dependency

    if not isinstance(peer, getattr(keras_hub.models, class_name)):
        raise TypeError(f"Expected a keras_hub.models.{class_name}, got "
                        f"{type(peer).__name__}.")


# What keras-hub's encoder backbones fix in code instead of taking as
# arguments (read from keras-hub 0.x's sources): the feed-forward activation
# and LayerNorm epsilon. Our backbones leave both open, and one with other
# values would compute something else inside the peer, so it is refused.
FIXED_BY_KERAS_HUB = {
    "AlbertBackbone": ("gelu_approximate", 1e-12),
    "BertBackbone": ("gelu_approximate", 1e-12),
    "DistilBertBackbone": ("gelu", 1e-12),
    "ElectraBackbone": ("gelu_approximate", 1e-12),
    "RobertaBackbone": ("gelu", 1e-5),
}
_ACTIVATION_NAMES = {"gelu_approximate": "the tanh-approximate GELU", "gelu": "the erf GELU"}


def require_exact(ours, class_name):
    """A ValueError unless our backbone `ours` computes what keras-hub's
    `class_name` computes with the same weights (`FIXED_BY_KERAS_HUB`)."""
    activation, epsilon = FIXED_BY_KERAS_HUB[class_name]
    if ours.activation != activation:
        raise ValueError(
            f"keras-hub's {class_name} uses {_ACTIVATION_NAMES[activation]} "
            f"({activation!r}); this backbone uses {ours.activation!r}, so its "
            f"outputs would change. Convert only {activation} backbones."
        )
    if not math.isclose(ours.layer_norm_epsilon, epsilon, rel_tol=1e-9):
        raise ValueError(
            f"keras-hub's {class_name} uses layer_norm_epsilon={epsilon:g}; this "
            f"backbone uses {ours.layer_norm_epsilon:g}, so its outputs would change."
        )


def canonical_shape(key, variable, hidden):
    """Only the per-head attention tensors differ from the canonical 2-D
    [in, out] / 1-D layout."""
    if key in ("query_kernel", "key_kernel", "value_kernel"):
        return (hidden, -1)  # [H, N, D] -> [H, N * D]
    if key == "attention_output_kernel":
        return (-1, hidden)  # [N, D, H] -> [N * D, H]
    if key in ("query_bias", "key_bias", "value_bias"):
        return (-1,)  # [N, D] -> [N * D]
    return tuple(variable.shape)


class VariableView(np.lib.mixins.NDArrayOperatorsMixin):
    """A peer variable in the canonical shape, read when it is used: a
    conversion holds one tensor at a time beside the two models, never a
    third full copy of the weights."""

    def __init__(self, variable, shape):
        self.variable = variable
        size = int(np.prod(tuple(variable.shape), dtype=np.int64))
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        self.shape = tuple(size // known if d == -1 else int(d) for d in shape)

    @property
    def ndim(self):
        return len(self.shape)

    def __array__(self, dtype=None, copy=None):
        values = np.reshape(self.variable.numpy(), self.shape)
        return values if dtype is None else values.astype(dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = [np.asarray(x) if isinstance(x, VariableView) else x for x in inputs]
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __getitem__(self, index):
        return np.asarray(self)[index]

    @property
    def transposed(self):
        # Row slices read straight from the source only when the canonical
        # shape is the stored one (embedding tables).
        return not (hasattr(self.variable, "rows")
                    and self.shape == tuple(self.variable.shape)) or self.variable.transposed

    @property
    def nbytes(self):
        return getattr(self.variable, "nbytes", 0)

    def rows(self, start, stop):
        return self.variable.rows(start, stop)

    def astype(self, dtype, copy=True):
        return np.asarray(self).astype(dtype)


def _read_block(layer, hidden):
    return {key: VariableView(v, canonical_shape(key, v, hidden))
            for key, v in variables(layer, BLOCK)}


def read_keras_hub(peer, class_name):
    """A keras-hub backbone of `class_name` -> the canonical dict (array-likes
    read on use: `VariableView`).
    ALBERT's `transformer_layers` are groups of distinct blocks: they come
    back as "groups" ([group][inner] layer dicts), others as "layers"."""
    require(peer, class_name)
    hidden = peer.hidden_dim
    weights = {key: VariableView(v, tuple(v.shape)) for key, v in variables(peer, TOP[class_name])}
    if class_name == "AlbertBackbone":
        weights["groups"] = [[_read_block(layer, hidden) for layer in group]
                             for group in peer.transformer_layers]
    else:
        weights["layers"] = [_read_block(layer, hidden) for layer in peer.transformer_layers]
    return weights


def write_keras_hub(peer, class_name, weights):
    """Writes the canonical dict (with "layers", or ALBERT's "groups") into
    a keras-hub backbone of matching shape; returns it."""
    for key, variable in variables(peer, TOP[class_name]):
        _assign(variable, np.reshape(weights[key], variable.shape), key)
    if class_name == "AlbertBackbone":
        pairs = [(f"group {g} block {r}", layer, src)
                 for g, (group, src_group) in enumerate(zip(peer.transformer_layers,
                                                             weights["groups"]))
                 for r, (layer, src) in enumerate(zip(group, src_group))]
    else:
        pairs = [(f"layer {i}", layer, src)
                 for i, (layer, src) in enumerate(zip(peer.transformer_layers,
                                                      weights["layers"]))]
    for where, layer, src in pairs:
        for key, variable in variables(layer, BLOCK):
            _assign(variable, np.reshape(src[key], variable.shape), f"{where} {key}")
    return peer
