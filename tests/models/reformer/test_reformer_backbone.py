"""ReformerBackbone: the zoo's contract, causality by gradients, the
reversible training pass equal to ordinary backpropagation, presets."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.models import ReformerBackbone
from kerasbert.models.config_checks import ConfigError
from kerasbert.testing import TestCase
from kerasbert.testing import tiny_encoder_inputs

from slow_marks import slow_covered_by

KWARGS = dict(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
              intermediate_dim=32, max_sequence_length=64, attention_layers=["local", "lsh"],
              num_hashes=2, num_buckets=4, lsh_chunk_length=4, local_chunk_length=4,
              axial_shape=[8, 8], axial_dims=[4, 12], dropout=0.0)
INPUTS = tiny_encoder_inputs(length=12, seed=5, segments=False)


def _shapes(batch, length, width, layers):
    return {"sequence_output": (batch, length, width), "pooled_output": (batch, width),
            "encoder_outputs": [(batch, length, width)] * layers}


def _check_reversible_gradients(num_layers, length, padded_from):
    """Gradients of the recomputing (reversible) pass equal those of the
    same layers run as an ordinary residual stack, within 1e-5."""
    config = dict(KWARGS, num_layers=num_layers, dropout=0.1, attention_dropout=0.1,
                  feed_forward_chunk_size=5)
    ids = tf.constant(np.random.RandomState(2).randint(0, 50, (2, length)), tf.int32)
    mask = np.ones((2, length), "int32")
    mask[1, padded_from:] = 0
    inputs = {"input_word_ids": ids, "input_mask": tf.constant(mask),
              "input_type_ids": tf.zeros_like(ids)}
    results = {}
    for recompute in (False, True):
        # The same seeds for the dropout outside the stack (embeddings).
        keras.utils.set_random_seed(11)
        model = ReformerBackbone(**dict(config, recompute=recompute, seed=7))
        if recompute:
            model.set_weights(weights)

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                out = model(inputs, training=True)
                # Means keep the gradients near 1, so 1e-5 is a
                # tolerance well above float32 rounding (sums over all
                # positions made some gradients ~300, whose last bit
                # is 2e-5).
                loss = tf.reduce_mean(tf.sin(out["sequence_output"]))
                loss += tf.reduce_mean(out["encoder_outputs"][1] ** 2) * 1e-2
            return loss, tape.gradient(loss, model.trainable_variables)

        loss, grads = step()
        weights = model.get_weights()
        results[recompute] = (float(loss), [tf.convert_to_tensor(g).numpy() for g in grads])
    # Float32 sums in another order: equal to a few parts in a million.
    assert results[False][0] == pytest.approx(results[True][0], rel=1e-5, abs=1e-5)
    for a, b in zip(results[False][1], results[True][1]):
        np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)
    assert max(np.abs(g).max() for g in results[True][1]) > 1e-2


class TestReformerBackbone(TestCase):
    def test_backbone_basics(self):
        for causal in (True, False):
            self.run_backbone_test(ReformerBackbone, dict(KWARGS, causal=causal), INPUTS,
                                   expected_output_shape=_shapes(2, 12, 32, 2))

    def test_no_output_depends_on_a_later_position(self):
        """Gradient check: d output[t] / d embedding[s] is exactly 0 for
        every s > t, through every layer (hashing and sorting are not
        differentiable paths; the masks are exact)."""
        model = ReformerBackbone(**dict(KWARGS, num_layers=4, initializer_range=0.5))
        ids = tf.constant(INPUTS["input_word_ids"])
        embed = model.embeddings
        rest = {k: tf.constant(v) for k, v in INPUTS.items()}
        x = embed(ids)
        for t in (0, 3, 6, 10):
            with tf.GradientTape() as tape:
                tape.watch(x)
                pairs = model.reversible(x, x, rest["input_mask"])
                out = tf.concat(pairs[-1], -1)[:, t]
            grad = tape.gradient(out, x).numpy()
            assert np.abs(grad[:, t + 1:]).max() == 0.0, t
            assert np.abs(grad[:, :t + 1]).max() > 0.0, t

    def test_reversible_gradients_equal_backpropagation_on_two_layers(self):
        """The check below on the smallest stack with both attention kinds
        (local, LSH): 2 layers, 12 tokens, dropout and fresh LSH rotations,
        chunked feed-forward, in a compiled training step."""
        _check_reversible_gradients(num_layers=2, length=12, padded_from=8)

    # 20 s: 4 layers over 30 tokens, recomputation chained deeper; the default suite runs 2 over 12.
    @slow_covered_by("tests/models/reformer/test_reformer_backbone.py::TestReformerBackbone::"
                     "test_reversible_gradients_equal_backpropagation_on_two_layers",
                     "tests/test_kernels.py::test_the_eager_reversible_forward_pass_tapes_nothing")
    def test_reversible_training_gradients_equal_ordinary_backpropagation(self):
        """The recomputing backward pass (activations rebuilt from each
        layer's output) gives the gradients of the same layers run as an
        ordinary residual stack, within 1e-5, in a compiled training step
        with dropout and fresh LSH rotations (both passes draw the same)."""
        _check_reversible_gradients(num_layers=4, length=30, padded_from=21)

    def test_config_is_checked(self):
        with pytest.raises(ConfigError, match="axial_shape"):
            ReformerBackbone(**dict(KWARGS, axial_shape=[8, 4]))
        with pytest.raises(ConfigError, match="axial_dims"):
            ReformerBackbone(**dict(KWARGS, axial_dims=[4, 4]))
        with pytest.raises(ConfigError, match="attention_layers"):
            ReformerBackbone(**dict(KWARGS, attention_layers=["full"]))

    def test_attention_layers_repeat(self):
        model = ReformerBackbone(**dict(KWARGS, num_layers=5))
        assert model.layer_kinds() == ["local", "lsh", "local", "lsh", "local"]
        kinds = [type(f.inner).__name__ for f, _ in model.transformer_layers]
        assert kinds == ["LocalSelfAttention", "LSHSelfAttention"] * 2 + ["LocalSelfAttention"]


class TestReformerPresets(TestCase):
    def test_crime_and_punishment_has_the_published_parameter_count(self):
        # Hugging Face's ReformerModel of this config: 2,584,064.
        model = ReformerBackbone.from_preset("reformer_crime_and_punishment")
        assert model.count_params() == 2_584_064
        assert model.output_dim == 512
