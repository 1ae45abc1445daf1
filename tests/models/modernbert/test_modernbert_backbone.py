"""ModernBertBackbone: the shared backbone checks, its layer pattern, the
published parameter counts, and the sliding window equal to the full matrix
with the window as a mask."""

import numpy as np
import pytest

from kerasbert.layers import MultiHeadSelfAttention
from kerasbert.layers import padding_mask_to_attention_bias
from kerasbert.layers.sliding_window import band_bias
from kerasbert.models import ModernBertBackbone
from kerasbert.models.config_checks import ConfigError
from kerasbert.testing import TestCase
from kerasbert.testing import tiny_encoder_config
from kerasbert.testing import tiny_encoder_inputs

KWARGS = tiny_encoder_config(num_layers=3, local_attention=4)
INPUTS = tiny_encoder_inputs(length=12, segments=False)


class TestModernBertBackbone(TestCase):
    def test_backbone_basics(self):
        self.run_backbone_test(ModernBertBackbone, init_kwargs=KWARGS, input_data=INPUTS)

    def test_layers_alternate_global_and_local_without_biases(self):
        model = ModernBertBackbone(**KWARGS)
        blocks = model.transformer_layers
        assert [b.attention.window for b in blocks] == [None, 2, 2]
        assert [b.attention.rotary_theta for b in blocks] == [160000.0, 10000.0, 10000.0]
        assert blocks[0].attention_layer_norm is None and blocks[1].attention_layer_norm
        assert not any(w.path.endswith(("bias", "beta")) for w in model.weights)
        assert model.embeddings.position_embedding is None
        out = model(INPUTS)
        self.assertAllClose(out["sequence_output"][:, 0], out["pooled_output"])


@pytest.mark.parametrize("name,count", [("modernbert_base", 149_014_272),
                                        ("modernbert_large", 394_781_696)])
def test_presets_have_the_published_counts(name, count):
    config = ModernBertBackbone.preset_config(name)
    assert ModernBertBackbone.estimate_parameters(config) == count


def test_the_estimate_is_what_a_built_model_counts():
    """At base widths (two layers: one global, one local; a one-row table),
    so the presets' estimates above are their built counts."""
    small = ModernBertBackbone.from_preset("modernbert_base", num_layers=2, vocabulary_size=1)
    assert small.count_params() == ModernBertBackbone.estimate_parameters(small.get_config())
    assert small.count_params() == 768 + 2 * (4 * 768**2 + 3 * 768 * 1152 + 2 * 768) + 768


@pytest.mark.parametrize("length", [3, 9, 16, 21])
def test_windowed_attention_equals_the_masked_full_matrix(length):
    rng = np.random.default_rng(length)
    x = rng.normal(size=(2, length, 8)).astype("float32")
    mask = np.ones((2, length), "int32")
    mask[1, length * 2 // 3:] = 0
    bias = padding_mask_to_attention_bias(mask)
    layer = MultiHeadSelfAttention(2, dropout=0.0, use_bias=False, rotary_theta=100.0, window=3)
    windowed = np.asarray(layer(x, attention_bias=bias))
    full = np.asarray(layer.attend(*_rotated(layer, x),
                                   np.minimum(np.asarray(bias), np.asarray(band_bias(None, length, 3)))))
    np.testing.assert_allclose(windowed * mask[..., None], full * mask[..., None], atol=1e-5)


def _rotated(layer, x):
    query, key, value = layer.project(x)
    return layer.rotary(query), layer.rotary(key), value


@pytest.mark.parametrize("override,fragment", [({"hidden_dim": 36, "num_heads": 4}, "even head width"),
                                               ({"local_attention": 0}, "local_attention")])
def test_config_checks_name_the_value(override, fragment):
    with pytest.raises(ConfigError, match=fragment):
        ModernBertBackbone.preset_config("modernbert_base", **override)


def test_chunked_global_attention_equals_the_plain_model():
    """Global layers with queries in chunks of 5 (12 tokens: 3 chunks, the
    last padded) give the plain model's outputs and gradients."""
    import keras

    chunked = ModernBertBackbone(**KWARGS, global_attention_chunk=5)
    plain = ModernBertBackbone(**KWARGS, global_attention_chunk=None)
    plain.set_weights(chunked.get_weights())
    assert chunked.transformer_layers[0].attention.query_chunk == 5
    assert chunked.transformer_layers[1].attention.query_chunk is None  # local
    assert plain.transformer_layers[0].attention.query_chunk is None
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(np.asarray(chunked(INPUTS)[key]),
                                   np.asarray(plain(INPUTS)[key]), atol=1e-5)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        def grads(model):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(model(INPUTS)["sequence_output"] ** 2)
            return tape.gradient(loss, model.trainable_variables)

        for a, b in zip(grads(chunked), grads(plain)):
            np.testing.assert_allclose(np.asarray(tf.convert_to_tensor(a)),
                                       np.asarray(tf.convert_to_tensor(b)), atol=1e-5)


def test_global_attention_chunk_is_checked():
    with pytest.raises(ConfigError, match="global_attention_chunk"):
        ModernBertBackbone.preset_config("modernbert_base", global_attention_chunk=0)
