"""SentencePooling against sentence-transformers' pooling in NumPy."""

import keras
import numpy as np
import pytest

from kerasbert.layers import SentencePooling
from kerasbert.testing.sentence_models import reference_pooling

MODES = [("mean",), ("cls",), ("max",), ("mean_sqrt_len",), ("cls", "max", "mean")]


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 2.0, (4, 7, 5)).astype(np.float32)
    mask = (np.arange(7)[None] < np.array([7, 4, 1, 0])[:, None]).astype(np.int32)
    return x, mask


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("pooling", MODES)
def test_matches_numpy_reference(pooling, normalize):
    x, mask = _batch()
    got = np.asarray(SentencePooling(pooling, normalize)(x, mask))
    assert got.dtype == np.float32 and got.shape == (4, 5 * len(pooling))
    want = reference_pooling(x[:3], mask[:3], pooling, normalize)
    np.testing.assert_allclose(got[:3], want, atol=1e-6)
    # The fully padded row: no NaN; masked modes give zeros.
    assert np.isfinite(got[3]).all()
    if pooling != ("cls",):
        assert np.all(got[3, 5 if pooling[0] == "cls" else 0:] == 0)


def test_padding_values_do_not_leak():
    x, mask = _batch()
    x2 = x.copy()
    x2[mask == 0] = 1e6
    layer = SentencePooling("max+mean")
    np.testing.assert_array_equal(np.asarray(layer(x, mask)), np.asarray(layer(x2, mask)))


def test_float16_inputs_pool_in_float32():
    x, mask = _batch()
    x = x * 300.0  # a float16 sum over tokens of these would lose digits
    got = np.asarray(SentencePooling("mean", True)(x.astype(np.float16), mask))
    want = reference_pooling(x.astype(np.float16)[:3], mask[:3], ("mean",), True)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got[:3], want, atol=1e-6)


def test_no_mask_means_all_tokens_and_config_round_trips():
    x, _ = _batch()
    layer = SentencePooling(["mean", "cls"], normalize=True, name="p")
    np.testing.assert_allclose(np.asarray(layer(x)),
                               reference_pooling(x, np.ones((4, 7)), ("cls", "mean"), True),
                               atol=1e-6)
    config = layer.get_config()
    assert config["pooling"] == ["cls", "mean"] and config["normalize"] is True
    clone = SentencePooling.from_config(config)
    assert clone.pooling == ("cls", "mean") and clone.normalize
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert isinstance(restored, SentencePooling) and restored.pooling == layer.pooling
    assert layer.compute_output_shape((None, 7, 5)) == (None, 10)


def test_unknown_mode_is_named():
    with pytest.raises(ValueError, match="Unknown pooling mode.*median"):
        SentencePooling("mean+median")


def test_gradient_of_normalized_zero_vector_is_finite():
    import tensorflow as tf

    x = tf.zeros((1, 3, 4))
    mask = tf.constant([[1, 1, 0]])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = SentencePooling("mean", normalize=True)(x, mask)
    assert np.isfinite(tape.gradient(y, x).numpy()).all()
