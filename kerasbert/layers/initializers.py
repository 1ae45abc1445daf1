"""The weight initializer every BERT-family layer shares, and building a
model whose weights a checkpoint is about to overwrite.

Drawing BERT-Base's 110M truncated-normal values takes about 1.5 s on two
cores, longer than reading the checkpoint that replaces them. Inside
`loads_checkpoint`, `bert_initializer` fills NaN instead (a memset); when the
loader returns, every weight the checkpoint did not write (still NaN: a
pooler a masked-LM checkpoint lacks, rows of a grown vocabulary) gets BERT's
values after all, so a loaded model never differs from one initialised the
slow way except where the checkpoint wrote it.
"""

import contextvars
import functools

import keras
import numpy as np

_LOADING = contextvars.ContextVar("kerasbert_loading_checkpoint", default=False)


def bert_initializer(stddev=0.02):
    """Truncated normal with stddev 0.02, as in the original BERT (NaN
    while a checkpoint loader builds the layer: `loads_checkpoint`)."""
    if _LOADING.get():
        return _Unwritten(stddev=stddev)
    return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.saving.register_keras_serializable(package="kerasbert")
class _Unwritten(keras.initializers.TruncatedNormal):
    """NaN while a checkpoint is being loaded, BERT's truncated normal
    otherwise (a layer that outlives the load initialises normally)."""

    def __call__(self, shape, dtype=None):
        if _LOADING.get():
            return keras.ops.full(shape, float("nan"), dtype=dtype or "float32")
        return super().__call__(shape, dtype=dtype)


def loads_checkpoint(function):
    """Decorates a function that builds a backbone and writes a
    checkpoint's weights into it, returning the backbone (see the module
    docstring)."""

    @functools.wraps(function)
    def load(*args, **kwargs):
        token = _LOADING.set(True)
        try:
            model = function(*args, **kwargs)
        finally:
            _LOADING.reset(token)
        draw_unwritten(model)
        return model

    return load


def draw_unwritten(model):
    """Gives every weight of `model` still NaN-filled by a loader its
    truncated-normal initial values (stddev: the model's
    `initializer_range`, else 0.02)."""
    stddev = float(getattr(model, "initializer_range", None) or 0.02)
    for variable in getattr(model, "weights", ()):
        if not np.prod(variable.shape) or "float" not in str(variable.dtype):
            continue
        first = keras.ops.convert_to_numpy(keras.ops.reshape(variable.value, [-1])[:1])
        if np.isnan(first).all():
            variable.assign(keras.initializers.TruncatedNormal(stddev=stddev)(
                tuple(variable.shape), dtype=variable.dtype))
