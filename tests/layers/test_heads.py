import keras
import numpy as np
import pytest

from kerasbert.layers import ClsPooler
from kerasbert.layers import MaskedLMHead
from kerasbert.layers import NextSentenceHead
from kerasbert.testing import TestCase

RNG = np.random.RandomState(2)
SEQ = RNG.normal(size=(2, 7, 16)).astype("float32")
POSITIONS = np.array([[1, 3, 0], [6, 2, 2]], "int32")


class TestClsPooler(TestCase):
    def test_layer_basics(self):
        self.run_layer_test(
            ClsPooler, {"hidden_dim": 16}, SEQ,
            expected_output_shape=(2, 16), expected_num_trainable_weights=2,
        )

    def test_dense_tanh_on_first_token(self):
        pooler = ClsPooler(16)
        out = np.asarray(pooler(SEQ))
        k, b = pooler.dense.kernel.numpy(), pooler.dense.bias.numpy()
        np.testing.assert_allclose(out, np.tanh(SEQ[:, 0] @ k + b), atol=1e-6)


class TestMaskedLMHead(TestCase):
    def test_layer_basics_untied(self):
        self.run_layer_test(
            MaskedLMHead,
            {"vocabulary_size": 40, "embedding_dim": 16},
            (SEQ, POSITIONS),
            expected_output_shape=(2, 3, 40),
            # transform kernel/bias, LayerNorm, decoder kernel, output bias
            expected_num_trainable_weights=6,
        )

    def test_tied_decoder_gathers_first(self):
        embedding = keras.layers.ReversibleEmbedding(40, 16)
        embedding.build((None,))
        head = MaskedLMHead(40, token_embedding=embedding)
        logits = np.asarray(head(SEQ, POSITIONS))
        assert logits.shape == (2, 3, 40) and logits.dtype == np.float32
        # The head owns no decoder matrix: it reuses the embedding table.
        own = [w for w in head.trainable_weights if w is not embedding.embeddings]
        assert len(own) == 5
        assert not any(tuple(w.shape) == (40, 16) for w in own)
        # Same as transforming every position, then picking the masked ones.
        x = SEQ[np.arange(2)[:, None], POSITIONS]
        h = np.asarray(head.layer_norm(head.dense(x)))
        expected = h @ embedding.embeddings.numpy().T + head.output_bias.numpy()
        np.testing.assert_allclose(logits, expected, atol=1e-5)

    def test_tied_head_gradients_reach_the_embedding(self):
        import tensorflow as tf

        embedding = keras.layers.ReversibleEmbedding(40, 16)
        embedding.build((None,))
        head = MaskedLMHead(40, token_embedding=embedding)
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(head(SEQ, POSITIONS) ** 2)
        grad = tape.gradient(loss, embedding.embeddings)
        assert grad is not None and np.any(np.asarray(tf.convert_to_tensor(grad)) != 0)

    def test_cross_entropy_of_hidden_equals_that_of_the_logits(self):
        """`cross_entropy(hidden(...), labels)` (the fused decoder + loss the
        pretrainers train on) gives the loss and gradients of the call's
        [B, P, V] logits (tied and untied decoders)."""
        import tensorflow as tf

        from kerasbert.kernels import token_cross_entropy

        embedding = keras.layers.ReversibleEmbedding(40, 16)
        embedding.build((None,))
        labels = RNG.randint(0, 40, (2, 3)).astype("int32")
        for head in (MaskedLMHead(40, token_embedding=embedding),
                     MaskedLMHead(40, embedding_dim=16)):
            head.build(SEQ.shape)
            head.output_bias.assign(RNG.normal(size=40).astype("float32"))
            results = []
            for fused in (False, True):
                with tf.GradientTape() as tape:
                    if fused:
                        ce, _ = head.cross_entropy(head.hidden(SEQ, POSITIONS), labels)
                    else:
                        ce, _ = token_cross_entropy(head(SEQ, POSITIONS), labels)
                    loss = tf.reduce_sum(ce)
                grads = tape.gradient(loss, head.trainable_weights + [embedding.embeddings])
                results.append([ce] + [tf.convert_to_tensor(g) if g is not None else 0.0
                                       for g in grads])
            for a, b in zip(*results):
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
        assert head.compute_output_shape((2, 7, 16), (2, 3)) == (2, 3, 40)

    def test_bias_free_transform(self):
        """use_bias=False (ModernBERT): no dense bias, a scale-only LayerNorm,
        the output bias kept; the key is written only when off."""
        head = MaskedLMHead(40, embedding_dim=16, use_bias=False)
        head(np.zeros((2, 5, 16), "float32"), np.zeros((2, 3), "int32"))
        assert sorted(w.path.split("/", 1)[1] for w in head.weights) == [
            "decoder_kernel", "output_bias", "transform/kernel", "transform_layer_norm/gamma"]
        assert head.get_config()["use_bias"] is False
        assert "use_bias" not in MaskedLMHead(40, embedding_dim=16).get_config()
        rebuilt = MaskedLMHead.from_config(head.get_config())
        rebuilt.build((None, None, 16))
        assert len(rebuilt.weights) == 4

    def test_vocabulary_mismatch_is_an_error(self):
        embedding = keras.layers.ReversibleEmbedding(40, 16)
        with pytest.raises(ValueError, match="does not match"):
            MaskedLMHead(41, token_embedding=embedding)
        with pytest.raises(ValueError, match="needs `token_embedding`"):
            MaskedLMHead(41)


class TestNextSentenceHead(TestCase):
    def test_layer_basics(self):
        self.run_layer_test(
            NextSentenceHead, {}, SEQ[:, 0],
            expected_output_shape=(2, 2), expected_num_trainable_weights=2,
        )

    def test_logits_are_float32_under_mixed_precision(self):
        head = NextSentenceHead(dtype="mixed_float16")
        assert np.asarray(head(SEQ[:, 0])).dtype == np.float32
