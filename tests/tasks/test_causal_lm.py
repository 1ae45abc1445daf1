import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.models import BertBackbone
from kerasbert.models.gpt import GptBackbone
from kerasbert.tasks import CausalLM
from kerasbert.testing import TestCase

from slow_marks import slow_covered_by

V = 40
KWARGS = dict(vocabulary_size=V, num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=64,
              max_sequence_length=40, dropout=0.0)
RNG = np.random.RandomState(0)
BATCH = {
    "input_word_ids": RNG.randint(0, V, (3, 9)).astype("int32"),
    "input_mask": np.array([[1] * 9, [1] * 6 + [0] * 3, [1] * 2 + [0] * 7], "int32"),
}


def numpy_loss(logits, ids, mask):
    logits = logits[:, :-1].astype("float64")
    logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1,
                                                                               keepdims=True))
    logp -= logits.max(-1, keepdims=True)
    target = ids[:, 1:]
    ce = -np.take_along_axis(logp, target[..., None], -1)[..., 0]
    w = mask[:, 1:] * mask[:, :-1]
    return (ce * w).sum() / w.sum()


class TestCausalLM(TestCase):
    def test_logits_are_the_tied_decoder(self):
        lm = CausalLM(GptBackbone(**KWARGS))
        logits = lm(BATCH)["logits"].numpy()
        assert logits.shape == (3, 9, V) and logits.dtype == np.float32
        hidden = lm.backbone(dict(BATCH, input_type_ids=0 * BATCH["input_mask"]))
        table = lm.backbone.token_embedding.embeddings.numpy()
        np.testing.assert_allclose(logits, hidden["sequence_output"].numpy() @ table.T,
                                   atol=1e-5)
        # No weights beyond the backbone's (tied decoder, no bias).
        assert lm.count_params() == lm.backbone.count_params()

    def test_loss_and_loop_protocol(self):
        lm = CausalLM(GptBackbone(**KWARGS))
        outputs = lm(BATCH)
        expected = numpy_loss(outputs["logits"].numpy(), BATCH["input_word_ids"],
                              BATCH["input_mask"])
        terms = lm.loss_terms(BATCH, outputs)
        assert float(terms["lm_weight_sum"]) == 8 + 5 + 1
        norms = lm.loss_normalizers(BATCH)
        assert float(norms["lm_weight_sum"]) == 14
        loss = float(lm.combine_loss_terms(terms, norms))
        np.testing.assert_allclose(loss, expected, rtol=1e-5)
        np.testing.assert_allclose(float(lm.compute_loss(BATCH, None, outputs)), expected,
                                   rtol=1e-5)
        summary = lm.summarize_terms({k: float(v) for k, v in terms.items()})
        np.testing.assert_allclose(summary["loss"], expected, rtol=1e-5)
        np.testing.assert_allclose(summary["perplexity"], np.exp(expected), rtol=1e-5)
        assert set(lm.progress_metrics.values()) <= set(summary)
        assert CausalLM.needs_masked_lm is False

    def test_loss_decodes_the_hidden_states_like_the_logits(self):
        """Training and inference give {"logits", "hidden"}; the loss decodes
        "hidden" through kernels.decoder_cross_entropy (vocabulary-major
        inside), and its per-position values, terms and gradients equal
        those from the [B, T, V] logits (dropout 0)."""
        import tensorflow as tf

        from kerasbert.tasks.causal_lm import next_token_elementwise

        lm = CausalLM(GptBackbone(**KWARGS))
        with tf.GradientTape(persistent=True) as tape:
            out = lm(BATCH, training=True)
            fast = lm.combine_loss_terms(lm.loss_terms(BATCH, out))
            plain = lm.combine_loss_terms(lm.loss_terms(BATCH, {"logits": out["logits"]}))
        assert set(out) == set(lm(BATCH)) == {"logits", "hidden"}
        assert tuple(out["logits"].shape) == (3, 9, V)
        np.testing.assert_allclose(out["logits"], lm(BATCH)["logits"], rtol=1e-5, atol=1e-5)
        decoder = lm.backbone.token_embedding
        e_fast = next_token_elementwise(BATCH["input_word_ids"], BATCH["input_mask"], decoder,
                                        hidden=out["hidden"])
        e_plain = next_token_elementwise(BATCH["input_word_ids"], BATCH["input_mask"], decoder,
                                         logits=out["logits"])
        for key in ("ce", "hits", "weights"):
            assert tuple(e_fast[key].shape) == (3, 8)
            np.testing.assert_allclose(e_fast[key], e_plain[key], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(float(fast), float(plain), rtol=1e-6)
        np.testing.assert_allclose(float(lm.compute_loss(BATCH, None, out)), float(plain),
                                   rtol=1e-6)
        for a, b in zip(tape.gradient(fast, lm.trainable_weights),
                        tape.gradient(plain, lm.trainable_weights)):
            np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b),
                                       rtol=1e-4, atol=1e-6)

    def test_refuses_a_bidirectional_backbone(self):
        bert = BertBackbone(vocabulary_size=V, num_layers=1, num_heads=2, hidden_dim=16,
                            intermediate_dim=32)
        with pytest.raises(ValueError, match="causal backbone"):
            CausalLM(bert)

    def test_save_and_load(self, tmp_path):
        lm = CausalLM(GptBackbone(**KWARGS))
        path = os.path.join(tmp_path, "lm.keras")
        lm.save(path)
        restored = keras.saving.load_model(path, safe_mode=True)
        assert type(restored) is CausalLM
        self.assertAllClose(lm(BATCH), restored(BATCH), atol=1e-6)

    def test_mixed_float16_loss_is_finite(self):
        lm = CausalLM(GptBackbone(**KWARGS, dtype="mixed_float16"))
        outputs = lm(BATCH)
        assert outputs["logits"].dtype == "float32"
        terms = lm.loss_terms(BATCH, outputs)
        self.assertAllFinite(lm.combine_loss_terms(terms))

    # 250 steps to memorise a text, then greedy generation regenerates it; the
    # default suite trains a CausalLM a few steps and generates (Reformer), and
    # checks a GPT CausalLM's greedy generation on prompts of different lengths.
    @slow_covered_by("tests/models/reformer/test_reformer_tasks.py::test_causal_lm_trains_saves_and_generates",
                     "tests/tasks/test_causal_lm.py::TestCausalLM::test_loss_and_loop_protocol",
                     "tests/serving/test_gpt_export.py::test_generation_export_matches_python_generate[in_process]")
    def test_fit_memorises_a_text_and_greedy_generation_regenerates_it(self):
        keras.utils.set_random_seed(0)
        text = [1] + RNG.randint(5, V, 24).tolist() + [2]  # start ... end
        lm = CausalLM(GptBackbone(**KWARGS))
        x = {"input_word_ids": np.array([text] * 8, "int32"),
             "input_mask": np.ones((8, len(text)), "int32")}
        lm.compile(optimizer=keras.optimizers.Adam(3e-3))
        history = lm.fit(tf.data.Dataset.from_tensors(x).repeat(250), verbose=0).history
        assert history["lm_accuracy"][-1] > 0.9
        for cut in (1, 5):
            generated = lm.generate(text[:cut], max_new_tokens=len(text), end_token_id=2)
            assert generated == text[cut:-1], cut
        # A batch of prompts of different lengths, right-padded internally.
        both = lm.generate([text[:3], text[:10]], max_new_tokens=5)
        assert both == [text[3:8], text[10:15]]


class TestGenerate:
    def test_same_seed_same_samples_and_bad_options(self):
        lm = CausalLM(GptBackbone(**KWARGS))
        a = lm.generate([1, 2, 3], max_new_tokens=6, strategy="top_p", top_p=0.95, seed=11)
        b = lm.generate([1, 2, 3], max_new_tokens=6, strategy="top_p", top_p=0.95, seed=11)
        assert a == b and len(a) == 6
        for bad, match in (({"strategy": "beam"}, "strategy"), ({"top_k": 0}, "top_k"),
                           ({"top_p": 0.0}, "top_p"), ({"temperature": 0}, "temperature"),
                           ({"max_new_tokens": 0}, "max_new_tokens")):
            with pytest.raises(ValueError, match=match):
                lm.generate([1, 2], **bad)
        with pytest.raises(ValueError, match="positions"):
            lm.generate(list(range(40)))
        with pytest.raises(ValueError, match="at least one token"):
            lm.generate([[1], []])

    def test_batched_generation_is_each_prompts_own_greedy_continuation(self):
        """Prompts of different lengths in one buffer of 12 positions: each
        row equals a one-token-at-a-time argmax over its own unpadded
        tokens, stops at the end token or where the buffer is full, and
        the graph (`generate_ids` in a tf.function, as the export runs it)
        gives the same."""
        keras.utils.set_random_seed(3)
        lm = CausalLM(GptBackbone(**dict(KWARGS, max_sequence_length=12)))
        prompts = [[1, 5, 6, 7, 8, 9, 10, 11, 12], [1, 7], [1, 20, 21, 22]]

        def own_greedy(prompt, steps, end):
            """The new tokens of `prompt`, one forward pass per token."""
            row = list(prompt)
            for _ in range(min(steps, 12 - len(row))):
                ids = keras.ops.convert_to_tensor(np.array([row], "int32"))
                token = int(np.argmax(keras.ops.convert_to_numpy(lm.next_token_logits(
                    ids, keras.ops.ones_like(ids), keras.ops.convert_to_tensor([len(row)])))))
                if token == end:
                    break
                row.append(token)
            return row[len(prompt):]

        free = [own_greedy(p, 6, None) for p in prompts]
        assert lm.generate(prompts, max_new_tokens=6) == free
        assert len(free[0]) == 3  # the buffer's room, not max_new_tokens
        end = free[1][2]  # a token the second row chooses: it ends it there
        ended = lm.generate(prompts, max_new_tokens=6, end_token_id=end)
        assert ended == [own_greedy(p, 6, end) for p in prompts]
        assert len(ended[1]) <= 2

        ids = np.zeros((3, 12), "int32")
        for i, p in enumerate(prompts):
            ids[i, :len(p)] = p
        graph = tf.function(lm.generate_ids, autograph=False)
        new, counts = graph(tf.constant(ids), tf.constant([9, 2, 4]), tf.constant(6), end)
        assert [row[:n].tolist() for row, n in zip(new.numpy(), counts.numpy())] == ended
