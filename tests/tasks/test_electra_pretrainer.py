"""ElectraPretrainer: generator/discriminator wiring, replaced-token labels,
sampling, loss, loop protocol, fit, saving."""

import os
import tempfile
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.models import BertBackbone
from kerasbert.models import ElectraBackbone
from kerasbert.models import get_preset
from kerasbert.tasks import ElectraPretrainer
from kerasbert.tasks.electra_pretrainer import generator_config
from kerasbert.tasks.electra_pretrainer import replace_tokens
from kerasbert.testing import TestCase

KWARGS = dict(vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=16,
              intermediate_dim=32, embedding_dim=8, max_sequence_length=16)


def features(batch=4, length=10, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, length), "int32")
    mask[1:, length - 3:] = 0
    ids = rng.integers(5, 40, (batch, length)).astype("int32") * mask
    positions = np.array([[1, 3, 5]] * batch, "int32")
    positions[0, 2] = 0  # a padded prediction, as the data pads them
    original = np.take_along_axis(ids, positions, axis=1)
    original[0, 2] = 0
    weights = np.ones((batch, 3), "float32")
    weights[0, 2] = 0.0
    masked = ids.copy()
    for row, cols in enumerate(positions):
        masked[row, cols[weights[row] > 0]] = 4  # 4 plays [MASK]
    return {"input_word_ids": masked, "input_mask": mask,
            "input_type_ids": np.zeros_like(ids),
            "masked_lm_positions": positions, "masked_lm_ids": original,
            "masked_lm_weights": weights, "original_ids": ids}


def model_inputs(f):
    return {k: v for k, v in f.items() if k != "original_ids"}


def pretrainer(**kwargs):
    return ElectraPretrainer(ElectraBackbone(**KWARGS), seed=3, **kwargs)


def force_samples(model, token):
    """A huge output bias on one token: the generator then samples it at
    every masked position, so the corruption is known exactly."""
    bias = np.zeros(model.backbone.vocabulary_size, "float32")
    bias[token] = 1e4
    model.generator_lm_head.output_bias.assign(bias)


class TestReplaceTokens:
    def test_labels(self):
        ids = np.array([[2, 4, 4, 9, 4, 0]], "int32")  # 4 = [MASK], 0 = padding
        positions = np.array([[1, 2, 4, 0]], "int32")
        original = np.array([[7, 8, 6, 0]], "int32")
        weights = np.array([[1, 1, 1, 0]], "float32")  # last one is padding
        sampled = np.array([[7, 5, 3, 11]], "int32")
        corrupted, replaced = replace_tokens(ids, positions, original, weights, sampled)
        # Position 1: sampled the original 7 -> NOT replaced (the paper's rule);
        # 2 and 4 replaced; the padded prediction (position 0) writes nothing.
        np.testing.assert_array_equal(np.asarray(corrupted), [[2, 7, 5, 9, 3, 0]])
        np.testing.assert_array_equal(np.asarray(replaced), [[0, 0, 1, 0, 1, 0]])


class TestGeneratorConfig:
    def discriminator(self, name):
        return types.SimpleNamespace(**get_preset(name)["config"], activation="gelu",
                                     layer_norm_epsilon=1e-12, initializer_range=0.02)

    def test_electra_small_generator(self):
        # ELECTRA-Small: a 1/4-wide generator, hidden 64 with one 64-wide head.
        config = generator_config(self.discriminator("electra_small"), 0.25)
        assert (config["num_layers"], config["hidden_dim"], config["num_heads"],
                config["intermediate_dim"], config["embedding_dim"]) == (12, 64, 1, 256, 128)

    def test_electra_base_generator(self):
        # ELECTRA-Base: 1/3 -> hidden 256, 4 heads, embedding 768 projected to 256.
        config = generator_config(self.discriminator("electra_base"), 1 / 3)
        assert (config["hidden_dim"], config["num_heads"], config["embedding_dim"]) == (
            256, 4, 768)

    def test_bad_fraction(self):
        with pytest.raises(ValueError, match="generator_fraction"):
            generator_config(self.discriminator("electra_small"), 0.0)


class TestElectraPretrainer(TestCase):
    def test_outputs_and_sharing(self):
        model = pretrainer()
        f = features()
        out = model(model_inputs(f))
        assert tuple(out["mlm_logits"].shape) == (4, 3, 40)
        assert tuple(out["rtd_logits"].shape) == tuple(out["rtd_labels"].shape) == (4, 10)
        gen, disc = model.generator, model.backbone
        assert gen.hidden_dim == 4 and gen.num_layers == 2 and gen.shares_embeddings
        assert gen.token_embedding is disc.token_embedding
        assert model.generator_lm_head.token_embedding is disc.token_embedding
        # Every variable is counted once although the tables are shared.
        assert len({id(w) for w in model.weights}) == len(model.weights)
        corrupted = np.asarray(out["corrupted_ids"])
        # The discriminator reads the ORIGINAL sequence except at the masked
        # positions (no [MASK] left), and labels only tokens that differ.
        outside = np.ones_like(corrupted, bool)
        outside[:, [1, 3, 5]] = False
        outside[0, 5] = True  # the padded prediction was not written
        np.testing.assert_array_equal(corrupted[outside], f["original_ids"][outside])
        np.testing.assert_array_equal(np.asarray(out["rtd_labels"]),
                                      (corrupted != f["original_ids"]).astype("int32"))

    def test_forced_samples(self):
        model = pretrainer()
        force_samples(model, 7)
        f = features()
        out = model(model_inputs(f))
        corrupted = np.asarray(out["corrupted_ids"])
        assert (corrupted[1:, [1, 3, 5]] == 7).all() and (corrupted[0, [1, 3]] == 7).all()
        expected = np.zeros((4, 10), "int32")
        for row in range(4):
            for pos in ([1, 3] if row == 0 else [1, 3, 5]):
                expected[row, pos] = int(f["original_ids"][row, pos] != 7)
        np.testing.assert_array_equal(np.asarray(out["rtd_labels"]), expected)

    def test_sampling_is_seeded(self):
        f = model_inputs(features())
        a, b = pretrainer(), pretrainer()
        b.set_weights(a.get_weights())
        np.testing.assert_array_equal(np.asarray(a(f)["corrupted_ids"]),
                                      np.asarray(b(f)["corrupted_ids"]))
        # Successive calls draw new samples (the seed state advances).
        draws = {np.asarray(a(f)["corrupted_ids"]).tobytes() for _ in range(4)}
        assert len(draws) > 1

    def test_loss_is_mlm_plus_50_rtd(self):
        model = pretrainer()
        f = model_inputs(features())
        out = model(f)
        terms = model.loss_terms(f, out)
        loss = float(model.combine_loss_terms(terms, model.loss_normalizers(f)))
        # numpy reference
        logits = np.asarray(out["mlm_logits"], "float64")
        logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(-1, keepdims=True)
        ce = -np.take_along_axis(logp, f["masked_lm_ids"][..., None], -1)[..., 0]
        w = f["masked_lm_weights"]
        z = np.asarray(out["rtd_logits"], "float64")
        y = np.asarray(out["rtd_labels"], "float64")
        bce = np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))
        m = f["input_mask"]
        expected = (w * ce).sum() / w.sum() + 50.0 * (m * bce).sum() / m.sum()
        np.testing.assert_allclose(loss, expected, rtol=1e-5)
        # fit's compute_loss is the same loss.
        np.testing.assert_allclose(float(model.compute_loss(f, None, out)), loss, rtol=1e-6)
        summary = model.summarize_terms({k: float(v) for k, v in terms.items()})
        np.testing.assert_allclose(summary["loss"], expected, rtol=1e-5)
        assert set(summary) >= {"mlm_accuracy", "rtd_accuracy", "rtd_precision",
                                "rtd_recall", "replaced_rate"}
        assert summary["replaced_rate"] == pytest.approx(y[m > 0].mean())

    def test_no_gradient_through_sampling(self):
        model = pretrainer()
        f = model_inputs(features())
        own = [w for w in model.generator.trainable_weights
               if "transformer_layer" in w.path or "embeddings_projection" in w.path]
        shared = model.backbone.token_embedding.embeddings
        with tf.GradientTape(persistent=True) as tape:
            out = model(f, training=True)
            terms = model.loss_terms(f, out)
            rtd = terms["rtd_loss_sum"]
            mlm = terms["mlm_loss_sum"]
        # The discriminator loss reaches the shared table but not the
        # generator's own layers: the sampled ids carry no gradient.
        assert all(g is None for g in tape.gradient(rtd, own))
        assert tape.gradient(rtd, shared) is not None
        # The generator learns from its MLM loss only.
        assert all(g is not None for g in tape.gradient(mlm, own))

    def test_fit_and_metrics(self):
        model = pretrainer()
        model.compile(run_eagerly=True)  # eager: tracing fit costs ~20 s on 2 cores
        f = model_inputs(features())
        history = model.fit(f, batch_size=4, epochs=2, verbose=0).history
        for key in ("loss", "mlm_loss", "mlm_accuracy", "rtd_loss", "rtd_accuracy",
                    "rtd_precision", "rtd_recall"):
            assert np.isfinite(history[key]).all(), key
        assert model.optimizer.learning_rate.numpy() == pytest.approx(5e-4)

    def test_config_round_trip_and_saving(self):
        model = pretrainer(generator_fraction=0.5, rtd_weight=20.0)
        self.run_serialization_test(model)
        f = model_inputs(features())
        force_samples(model, 9)  # deterministic corruption, so outputs compare
        expected = model(f)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "electra.keras")
            model.save(path)
            loaded = keras.saving.load_model(path, safe_mode=True)
        assert type(loaded) is ElectraPretrainer and loaded.rtd_weight == 20.0
        assert loaded.generator.hidden_dim == 8
        assert loaded.generator.token_embedding is loaded.backbone.token_embedding
        self.assertAllClose(expected, loaded(f), atol=1e-6)

    def test_explicit_generator(self):
        disc = ElectraBackbone(**KWARGS)
        gen = ElectraBackbone(**{**KWARGS, "hidden_dim": 8, "num_heads": 1,
                                 "intermediate_dim": 16, "num_layers": 1},
                              shared_embeddings=disc.embeddings)
        model = ElectraPretrainer(disc, generator=gen)
        assert model.generator is gen
        assert model.get_config()["generator"]["num_layers"] == 1

    def test_mixed_precision_is_finite(self):
        disc = ElectraBackbone(**KWARGS, dtype="mixed_float16")
        model = ElectraPretrainer(disc)
        out = model(model_inputs(features()))
        assert out["mlm_logits"].dtype == "float32" and out["rtd_logits"].dtype == "float32"
        self.assertAllFinite({k: out[k] for k in ("mlm_logits", "rtd_logits")})

    def test_bad_input(self):
        with pytest.raises(ValueError, match="ElectraBackbone discriminator"):
            ElectraPretrainer(BertBackbone(**{**KWARGS, "embedding_dim": None}))
        disc = ElectraBackbone(**KWARGS)
        stranger = ElectraBackbone(**KWARGS)
        with pytest.raises(ValueError, match="share the discriminator's embeddings"):
            ElectraPretrainer(disc, generator=stranger)
        own = ElectraBackbone(**KWARGS, shared_embeddings=disc.embeddings)
        with pytest.raises(ValueError, match="must own its embeddings"):
            ElectraPretrainer(own)
        with pytest.raises(ValueError, match="temperature"):
            ElectraPretrainer(disc, temperature=0)
        f = model_inputs(features())
        del f["masked_lm_ids"]
        with pytest.raises(ValueError, match="lack masked_lm_ids"):
            ElectraPretrainer(disc)(f)
