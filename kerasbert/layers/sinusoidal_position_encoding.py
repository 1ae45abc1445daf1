"""Fixed sinusoidal position encodings (Vaswani et al., 2017, section 3.5).

No weights: the table is a function of the position and the width, so any
backbone can add it to its token embeddings, and a decoding step reads the
row of its own position (`start_index`).
"""

import math

import keras
import numpy as np
from keras import ops

LAYOUTS = ("interleaved", "concatenated")


def sinusoid_table(length, width, layout="interleaved"):
    """The [length, width] float32 table, computed in float32 (as
    TensorFlow computes it), so a peer's table and ours agree to rounding.

    interleaved (the paper): PE[p, 2i] = sin(p / 10000^(2i/d)),
        PE[p, 2i+1] = cos(p / 10000^(2i/d)), i = 0 .. d/2 - 1.
    concatenated (tensor2tensor's `get_timing_signal_1d`, Model Garden's
        `RelativePositionEmbedding`): [sin | cos], the first d/2 columns sines,
        the last d/2 cosines, with d/2 timescales spaced geometrically from
        1 to 10000 inclusive (the increment is log(10000) / (d/2 - 1), not
        the paper's log(10000) / (d/2)).
    """
    if width % 2:
        raise ValueError(f"A sinusoidal encoding needs an even width, got {width}.")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}.")
    half = width // 2
    steps = np.arange(half, dtype="float32")
    if layout == "interleaved":
        increment = np.float32(math.log(10000.0) / half)
    else:
        increment = np.float32(math.log(10000.0) / max(half - 1, 1))
    inverse = np.exp(steps * -increment).astype("float32")  # [d/2]
    angles = np.arange(length, dtype="float32")[:, None] * inverse[None, :]  # [L, d/2]
    sin, cos = np.sin(angles), np.cos(angles)
    if layout == "concatenated":
        return np.concatenate([sin, cos], axis=1).astype("float32")
    # Column 2i holds the sine of frequency i, column 2i + 1 its cosine.
    return np.stack([sin, cos], axis=2).reshape(length, width).astype("float32")


@keras.saving.register_keras_serializable(package="kerasbert")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """The rows of a fixed sinusoid table for the positions of `x`.

    Args:
        max_sequence_length: int, rows of the table (the longest sequence a
            model takes, source or target).
        layout: "interleaved" (the paper: sine and cosine of each frequency
            side by side) or "concatenated" (tensor2tensor / Model Garden:
            all sines, then all cosines; see `sinusoid_table`).

    Call args:
        x: float [..., T, width] (only its shape and dtype are used).
        start_index: int or int scalar tensor, the position of x's first row
            (0; a decoding step's index).

    Returns:
        float [..., T, width] in x's dtype: rows start_index ..
        start_index + T - 1, broadcast to x's shape.

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import SinusoidalPositionEncoding
    >>> encoding = SinusoidalPositionEncoding(max_sequence_length=16)
    >>> x = np.zeros((2, 5, 8), "float32")                    # [B, T, width]
    >>> rows = encoding(x)                                    # [B, T, width], no weights
    >>> tuple(rows.shape), np.asarray(rows)[0, 0, :2].tolist()   # position 0: sin 0, cos 0
    ((2, 5, 8), [0.0, 1.0])
    """

    def __init__(self, max_sequence_length, layout="interleaved", **kwargs):
        super().__init__(**kwargs)
        if int(max_sequence_length) < 1:
            raise ValueError(
                f"max_sequence_length must be >= 1, got {max_sequence_length}."
            )
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}.")
        self.max_sequence_length = int(max_sequence_length)
        self.layout = layout
        self._table = None

    def build(self, x_shape):
        self._table = sinusoid_table(self.max_sequence_length, x_shape[-1], self.layout)
        self.built = True

    def call(self, x, start_index=0):
        shape = ops.shape(x)
        table = ops.convert_to_tensor(self._table, dtype=x.dtype)
        rows = ops.slice(table, (start_index, 0), (shape[-2], shape[-1]))
        return ops.broadcast_to(rows, shape)

    def compute_output_shape(self, x_shape):
        return x_shape

    def get_config(self):
        return {**super().get_config(), "max_sequence_length": self.max_sequence_length,
                "layout": self.layout}
