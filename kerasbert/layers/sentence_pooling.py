"""Token vectors -> one sentence vector: masked mean, [CLS] or max, as the
sentence-transformers library pools them."""

import keras
from keras import ops

#: Pooling modes, in the order several modes are concatenated (the order
#: of sentence-transformers' `Pooling`).
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len")

# A mean over no tokens divides by this instead of 0 (sentence-transformers
# clamps the token count the same way), so a fully padded row gives 0.
_MIN_COUNT = 1e-9
# L2 normalisation divides by max(norm, 1e-12), as torch's F.normalize:
# written as x * rsqrt(max(|x|^2, 1e-24)) so a zero vector stays 0, with a
# finite gradient.
_MIN_SQUARED_NORM = 1e-24


def check_pooling(pooling):
    """`pooling` as a tuple of known modes, in concatenation order.

    Args:
        pooling: a mode name ("mean"), a "+"-joined string ("cls+mean") or
            a sequence of names.

    Raises:
        ValueError naming the unknown mode(s).
    """
    if isinstance(pooling, str):
        pooling = pooling.split("+")
    names = [str(name).strip().lower() for name in pooling]
    unknown = [name for name in names if name not in POOLING_MODES]
    if unknown or not names:
        raise ValueError(f"Unknown pooling mode(s) {', '.join(unknown) or '(none)'}; "
                         f"known: {', '.join(POOLING_MODES)} (several joined with '+').")
    return tuple(mode for mode in POOLING_MODES if mode in names)


@keras.saving.register_keras_serializable(package="kerasbert")
class SentencePooling(keras.layers.Layer):
    """Pools `sequence_output` over the real tokens into sentence vectors.

    Modes (sentence-transformers' `pooling_mode_*`):
        cls: the first position's vector (whatever the mask says).
        max: the element-wise max over tokens with mask 1.
        mean: the sum over tokens with mask 1 / their count.
        mean_sqrt_len: that sum / sqrt(count).
    Several modes are concatenated in that order. With `normalize` the
    result is divided by its L2 norm (at least 1e-12), as a
    sentence-transformers `Normalize` module does.

    The math runs in float32 whatever the inputs' dtype. A row with no real
    token gives zeros (no NaN) for max, mean and mean_sqrt_len.

    Args:
        pooling: a mode, "+"-joined modes or a list of modes.
        normalize: bool, L2-normalise the pooled vector.

    Call args:
        sequence_output: float [B, T, H].
        input_mask: int or bool [B, T], 1 on real tokens (None: all real).

    Returns:
        float32 [B, H * number of modes].

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import SentencePooling
    >>> pooling = SentencePooling("mean", normalize=True)
    >>> sequence_output = np.ones((2, 5, 8), "float32")       # [B, T, H]
    >>> input_mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    >>> vectors = pooling(sequence_output, input_mask)        # [B, H]
    >>> tuple(vectors.shape), np.round(np.linalg.norm(vectors, axis=-1), 3).tolist()
    ((2, 8), [1.0, 1.0])
    """

    def __init__(self, pooling="mean", normalize=False, **kwargs):
        super().__init__(**kwargs)
        self.pooling = check_pooling(pooling)
        self.normalize = bool(normalize)

    def call(self, sequence_output, input_mask=None):
        x = ops.cast(sequence_output, "float32")
        if input_mask is None:
            mask = ops.ones(ops.shape(x)[:2], "float32")
        else:
            mask = ops.cast(ops.not_equal(input_mask, 0), "float32")
        mask = ops.expand_dims(mask, -1)  # [B, T, 1]
        count = ops.sum(mask, axis=1)  # [B, 1]
        vectors = []
        for mode in self.pooling:
            if mode == "cls":
                vectors.append(x[:, 0, :])
            elif mode == "max":
                lowest = ops.full_like(x, -3.0e38)
                best = ops.max(ops.where(mask > 0, x, lowest), axis=1)
                vectors.append(ops.where(count > 0, best, ops.zeros_like(best)))
            else:
                total = ops.sum(x * mask, axis=1)
                divisor = ops.maximum(count, _MIN_COUNT)
                if mode == "mean_sqrt_len":
                    divisor = ops.sqrt(divisor)
                vectors.append(total / divisor)
        pooled = vectors[0] if len(vectors) == 1 else ops.concatenate(vectors, axis=-1)
        if self.normalize:
            squared = ops.sum(ops.square(pooled), axis=-1, keepdims=True)
            pooled = pooled * ops.rsqrt(ops.maximum(squared, _MIN_SQUARED_NORM))
        return pooled

    def compute_output_shape(self, sequence_shape, mask_shape=None):
        width = sequence_shape[-1]
        return (sequence_shape[0], None if width is None else width * len(self.pooling))

    def get_config(self):
        config = super().get_config()
        config.update({"pooling": list(self.pooling), "normalize": self.normalize})
        return config
