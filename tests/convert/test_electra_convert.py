"""ELECTRA parity: keras-hub ElectraBackbone and a Model Garden BertEncoder
with `embedding_width` (the discriminator network of tf-models-official's
ElectraPretrainer), same (random) weights, padded batch, float32 outputs
within 1e-5."""

import os
import sys

import keras_hub
import numpy as np
import pytest

from kerasbert.convert import from_keras_hub
from kerasbert.convert import to_keras_hub
from kerasbert.convert.electra_weights import electra_from_tf_models
from kerasbert.convert.electra_weights import get_electra_weights
from kerasbert.convert.electra_weights import set_electra_weights
from kerasbert.models import ElectraBackbone

sys.path.insert(0, os.path.dirname(__file__))
from peer_fixtures import hub_inputs  # noqa: E402
from peer_fixtures import max_diff  # noqa: E402
from peer_fixtures import ours_inputs  # noqa: E402
from peer_fixtures import padded_batch  # noqa: E402
from peer_fixtures import randomize  # noqa: E402
from peer_fixtures import tf_models_encoder  # noqa: E402
from slow_marks import slow_covered_by  # noqa: E402

# keras-hub's names; vocabulary 60, E=8 -> H=16 (ELECTRA-Small's factorisation).
HUB_TINY = dict(vocab_size=60, num_layers=3, num_heads=2, embedding_dim=8, hidden_dim=16,
                intermediate_dim=32, max_sequence_length=12)
OURS_TINY = dict(vocabulary_size=60, num_layers=3, num_heads=2, embedding_dim=8,
                 hidden_dim=16, intermediate_dim=32, max_sequence_length=12,
                 activation="gelu_approximate")


class TestKerasHub:
    @pytest.mark.parametrize("embedding_dim", [8, 16])  # factorised, and E == H
    def test_parity(self, embedding_dim):
        peer = keras_hub.models.ElectraBackbone(**{**HUB_TINY, "embedding_dim": embedding_dim})
        randomize(peer, seed=embedding_dim)
        ours = from_keras_hub(peer)
        assert isinstance(ours, ElectraBackbone) and ours.activation == "gelu_approximate"
        assert ours.count_params() == peer.count_params()
        assert (ours.embeddings.projection is None) == (embedding_dim == 16)
        data = padded_batch(60)
        diff = max_diff(peer(hub_inputs(*data)), ours(ours_inputs(*data)))
        assert diff <= 1e-5, diff

    def test_round_trip(self):
        ours = ElectraBackbone(**OURS_TINY)
        randomize(ours, seed=5)
        peer = to_keras_hub(ours)
        assert isinstance(peer, keras_hub.models.ElectraBackbone)
        data = padded_batch(60)
        assert max_diff(ours(ours_inputs(*data)), peer(hub_inputs(*data))) <= 1e-5
        back = from_keras_hub(peer)
        a, b = get_electra_weights(ours), get_electra_weights(back)
        assert sorted(a) == sorted(b)
        for key in a:
            if key != "layers":
                np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        for layer_a, layer_b in zip(a["layers"], b["layers"]):
            for key in layer_a:
                np.testing.assert_array_equal(layer_a[key], layer_b[key], err_msg=key)

    def test_generator_converts_with_its_own_projection(self):
        disc = ElectraBackbone(**OURS_TINY)
        gen = ElectraBackbone(**{**OURS_TINY, "hidden_dim": 4, "num_heads": 1,
                                 "intermediate_dim": 16}, shared_embeddings=disc.embeddings)
        randomize(disc.weights + gen.weights, seed=9)
        peer = to_keras_hub(gen)
        assert peer.count_params() == gen.count_params()
        data = padded_batch(60)
        assert max_diff(gen(ours_inputs(*data)), peer(hub_inputs(*data))) <= 1e-5
        with pytest.raises(ValueError, match="overwrite the owner's tables"):
            set_electra_weights(gen, get_electra_weights(gen))

    def test_refuses_what_cannot_convert_exactly(self):
        with pytest.raises(ValueError, match="tanh-approximate GELU"):
            to_keras_hub(ElectraBackbone(**{**OURS_TINY, "activation": "gelu"}))
        with pytest.raises(ValueError, match="layer_norm_epsilon"):
            to_keras_hub(ElectraBackbone(**{**OURS_TINY, "layer_norm_epsilon": 1e-6}))

    # electra_small's size (13.5M weights, 64 tokens); the default suite checks parity on tiny
    # models of both embedding widths and electra_small's parameter count.
    @slow_covered_by(
        "tests/convert/test_electra_convert.py::TestKerasHub::test_parity",
        "tests/models/electra/test_electra_backbone.py::TestElectraPresets::test_electra_small_parameter_count")
    def test_parity_at_electra_small_size(self):
        peer = keras_hub.models.ElectraBackbone(
            vocab_size=30522, num_layers=12, num_heads=4, hidden_dim=256, embedding_dim=128,
            intermediate_dim=1024)
        ours = from_keras_hub(peer)
        assert ours.count_params() == peer.count_params() == 13_548_800
        data = padded_batch(30522, length=64)
        assert max_diff(peer(hub_inputs(*data)), ours(ours_inputs(*data))) <= 1e-5


def tf_models_discriminator(**overrides):
    """The encoder tf-models-official's ElectraPretrainer takes as its
    discriminator_network: a BertEncoder whose embedding_width is
    ELECTRA's embedding_dim."""
    from official.nlp.modeling import networks

    config = dict(vocab_size=60, embedding_width=8, hidden_size=16, num_layers=3,
                  num_attention_heads=2, max_sequence_length=12, type_vocab_size=2,
                  inner_dim=32, dict_outputs=True)
    return tf_models_encoder(networks.BertEncoder, **{**config, **overrides})


class TestTfModels:
    def test_discriminator_parity(self):
        encoder = tf_models_discriminator()
        ours = electra_from_tf_models(encoder)
        assert isinstance(ours, ElectraBackbone) and ours.embedding_dim == 8
        assert ours.count_params() == encoder.count_params()
        data = ours_inputs(*padded_batch(60))
        expected, got = encoder(data), ours(data)
        assert max_diff(expected, got) <= 1e-5
        for e, g in zip(expected["encoder_outputs"], got["encoder_outputs"]):
            np.testing.assert_allclose(np.asarray(g), np.asarray(e), atol=1e-5)

    def test_rejects_other_encoders(self):
        with pytest.raises(TypeError, match="BertEncoder"):
            electra_from_tf_models(ElectraBackbone(**OURS_TINY))


def erf_gelu(x):
    import tf_keras

    return tf_keras.activations.gelu(x, approximate=False)


class TestTfModelsPretrainer:
    """Our ElectraPretrainer against tf-models-official's ElectraPretrainer
    with the same weights: the generator's masked-LM logits, and (with the
    sampling forced by a huge output bias on one token, so both corrupt the
    input identically) the discriminator's logits and replaced-token
    labels."""

    # ~15 s: two Model Garden encoders and a tf_keras pretrainer against ours; the default
    # suite checks the discriminator's parity and our pretrainer's wiring and labels.
    @slow_covered_by("tests/convert/test_electra_convert.py::TestTfModels::test_discriminator_parity",
                     "tests/tasks/test_electra_pretrainer.py::TestElectraPretrainer::test_forced_samples",
                     "tests/tasks/test_electra_pretrainer.py::TestElectraPretrainer::test_loss_is_mlm_plus_50_rtd")
    def test_pretrainer_parity(self):
        import tensorflow as tf
        from official.nlp.modeling import models

        from kerasbert.convert.bert_weights import _assign
        from kerasbert.convert.bert_weights import set_block_weights
        from kerasbert.convert.tf_models import tf_models_to_canonical
        from kerasbert.tasks import ElectraPretrainer

        disc_tf = tf_models_discriminator(activation=erf_gelu)
        gen_tf = tf_models_discriminator(activation=erf_gelu, hidden_size=4,
                                         num_attention_heads=1, inner_dim=16)
        # tf-models takes two separate encoders; ours shares the tables and
        # the embedding LayerNorm, so give both the same values.
        for name in ("word_embeddings", "position_embedding", "type_embeddings",
                     "embeddings/layer_norm"):
            for a, b in zip(gen_tf.get_layer(name).weights, disc_tf.get_layer(name).weights):
                a.assign(b)
        peer = models.ElectraPretrainer(
            generator_network=gen_tf, discriminator_network=disc_tf, vocab_size=60,
            num_classes=2, num_token_predictions=3, mlm_activation=erf_gelu)

        ours = ElectraPretrainer(electra_from_tf_models(disc_tf),
                                 generator=electra_from_tf_models(gen_tf).get_config())
        gen = tf_models_to_canonical(gen_tf)
        _assign(ours.generator.embeddings_projection.kernel,
                gen["embedding_projection_kernel"], "generator projection")
        _assign(ours.generator.embeddings_projection.bias,
                gen["embedding_projection_bias"], "generator projection bias")
        _assign(ours.generator.pooler.dense.kernel, gen["pooler_kernel"], "pooler")
        _assign(ours.generator.pooler.dense.bias, gen["pooler_bias"], "pooler bias")
        for block, src in zip(ours.generator.transformer_layers, gen["layers"]):
            set_block_weights(block, src)

        ids, mask, types = padded_batch(60, seed=4)
        positions = np.array([[1, 2, 4]] * 3, "int32")
        inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types,
                  "masked_lm_positions": positions,
                  "masked_lm_ids": np.take_along_axis(ids, positions, 1),
                  "masked_lm_weights": np.ones((3, 3), "float32")}
        inputs["input_word_ids"] = ids.copy()
        np.put_along_axis(inputs["input_word_ids"], positions, 4, axis=1)
        expected = peer({k: tf.constant(v) for k, v in inputs.items()})  # builds the heads

        lm, mlm_head = peer.masked_lm, ours.generator_lm_head
        for src, dst in ((lm.dense.kernel, mlm_head.dense.kernel),
                         (lm.dense.bias, mlm_head.dense.bias),
                         (lm.layer_norm.gamma, mlm_head.layer_norm.gamma),
                         (lm.layer_norm.beta, mlm_head.layer_norm.beta)):
            _assign(dst, src.numpy(), dst.path)
        head = ours.rtd_head
        for src, dst in ((peer.discriminator_projection.kernel, head.dense.kernel),
                         (peer.discriminator_projection.bias, head.dense.bias),
                         (peer.discriminator_head.kernel, head.logits.kernel),
                         (peer.discriminator_head.bias, head.logits.bias)):
            _assign(dst, src.numpy(), dst.path)
        bias = np.zeros(60, "float32")
        bias[7] = 1e4  # every masked position samples token 7, in both
        lm.bias.assign(bias)
        mlm_head.output_bias.assign(bias)

        expected = peer({k: tf.constant(v) for k, v in inputs.items()})
        got = ours(inputs)
        diffs = {
            "mlm_logits": float(np.max(np.abs(
                np.asarray(got["mlm_logits"]) - expected["lm_outputs"].numpy()))),
            "rtd_logits": float(np.max(np.abs(
                np.asarray(got["rtd_logits"]) - expected["disc_logits"].numpy()))),
        }
        # Logits near the 1e4 bias carry float32 rounding of ~1e-3; compare
        # those relative to their size and the rest absolutely.
        mlm_got, mlm_want = np.asarray(got["mlm_logits"]), expected["lm_outputs"].numpy()
        np.testing.assert_allclose(mlm_got[..., :7], mlm_want[..., :7], atol=1e-5)
        np.testing.assert_allclose(mlm_got, mlm_want, rtol=1e-6, atol=1e-5)
        assert diffs["rtd_logits"] <= 1e-5, diffs
        np.testing.assert_array_equal(np.asarray(got["rtd_labels"]),
                                      expected["disc_label"].numpy())
        assert np.asarray(got["rtd_labels"]).sum() > 0
