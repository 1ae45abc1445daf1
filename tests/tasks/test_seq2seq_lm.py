import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbert.models import TransformerBackbone
from kerasbert.optimizers.schedules import InverseSquareRootSchedule
from kerasbert.tasks import LabelSmoothedCrossEntropy
from kerasbert.tasks import Seq2SeqLM
from kerasbert.testing import TestCase

from slow_marks import slow_covered_by

KWARGS = dict(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=16,
              intermediate_dim=32, dropout=0.0, max_sequence_length=16)
START, END = 2, 1
SOURCE = np.array([[5, 6, 7, 1, 0], [8, 9, 1, 0, 0]], "int32")
SOURCE_MASK = (SOURCE != 0).astype("int32")


def _model(**kwargs):
    return Seq2SeqLM(TransformerBackbone(**dict(KWARGS, **kwargs)))


def _copy_batch(rng, batch=16):
    """Sources of 2-4 tokens in 3..9 + end; the target is the source."""
    src = np.zeros((batch, 5), "int32")
    dec = np.zeros((batch, 5), "int32")
    labels = np.zeros((batch, 5), "int32")
    for row in range(batch):
        tokens = list(rng.integers(3, 10, rng.integers(2, 5)))
        src[row, :len(tokens) + 1] = tokens + [END]
        dec[row, :len(tokens) + 1] = [START] + tokens
        labels[row, :len(tokens) + 1] = tokens + [END]
    return {"encoder_token_ids": src, "encoder_padding_mask": (src != 0).astype("int32"),
            "decoder_token_ids": dec, "decoder_padding_mask": (dec != 0).astype("int32")}, labels


class TestLabelSmoothedCrossEntropy(TestCase):
    def test_value_and_padding(self):
        rng = np.random.default_rng(0)
        logits = rng.normal(size=(2, 3, 7)).astype("float32")
        labels = np.array([[1, 4, 0], [6, 0, 0]], "int32")
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        expected = []
        for b, t in ((0, 0), (0, 1), (1, 0)):
            target = np.full(7, 0.1 / 7)
            target[labels[b, t]] += 0.9
            expected.append(-(target * log_probs[b, t]).sum())
        loss = LabelSmoothedCrossEntropy(0.1)(labels, logits)
        assert float(loss) == pytest.approx(np.mean(expected), rel=1e-5)
        # Padding (label 0) is never scored, whatever its logits.
        logits[0, 2] += 100.0
        assert float(LabelSmoothedCrossEntropy(0.1)(labels, logits)) == pytest.approx(
            np.mean(expected), rel=1e-5)
        with pytest.raises(ValueError, match="label_smoothing"):
            LabelSmoothedCrossEntropy(1.0)


class TestSeq2SeqLM(TestCase):
    def test_call_gives_tied_logits(self):
        model = _model()
        features, _ = _copy_batch(np.random.default_rng(0), 3)
        logits = model(features)
        assert tuple(logits.shape) == (3, 5, 30) and logits.dtype == "float32"
        hidden = model.backbone(features)
        self.assertAllClose(logits, model.backbone.logits(hidden), atol=1e-6)
        # Default masks: source id != 0, target all ones.
        plain = {k: features[k] for k in ("encoder_token_ids", "decoder_token_ids")}
        self.assertAllClose(logits[features["decoder_padding_mask"] == 1],
                            np.asarray(model(plain))[features["decoder_padding_mask"] == 1],
                            atol=1e-5)

    def test_default_compile_is_the_papers(self):
        model = _model()
        model.compile()
        optimizer = model.optimizer
        assert isinstance(optimizer, keras.optimizers.Adam)
        assert optimizer.beta_2 == pytest.approx(0.98) and optimizer.epsilon == 1e-9
        schedule = optimizer._learning_rate
        assert isinstance(schedule, InverseSquareRootSchedule)
        assert schedule.hidden_dim == 16 and schedule.warmup_steps == 4000
        assert isinstance(model.loss, LabelSmoothedCrossEntropy)
        assert model.loss.label_smoothing == pytest.approx(0.1)

    def test_a_recipe_sets_the_papers_schedule_peak_and_warmup(self):
        from kerasbert.optimizers import recipes

        model = _model()
        recipe = recipes.default_recipe("transformer", 1, 16)
        model.compile_with_recipe(recipe)  # what `kerasbert finetune` calls
        optimizer = model.optimizer
        assert type(optimizer) is keras.optimizers.Adam  # the family's, not AdamW
        assert optimizer.beta_2 == pytest.approx(0.98) and optimizer.epsilon == 1e-9
        assert optimizer.clipnorm is None and model.loss.label_smoothing == 0.1
        schedule = optimizer._learning_rate
        assert schedule.warmup_steps == 4000  # no run length yet: the paper's
        # fit sizes it: 64 examples / batch 16 x 3 epochs = 12 updates, w = 1
        features, labels = _copy_batch(np.random.default_rng(0), 64)
        model.fit(features, labels, batch_size=16, epochs=3, verbose=0)
        schedule = model.optimizer._learning_rate
        assert schedule.warmup_steps == recipes.transformer_warmup_steps(12, 0.1) == 1
        # --learning-rate is the peak, reached on step w (n = iterations + 1 = w).
        model = _model()
        model.compile(learning_rate=3e-3, num_train_steps=300, warmup_ratio=0.1)
        schedule = model.optimizer._learning_rate
        assert schedule.warmup_steps == 30
        rates = [float(schedule(step)) for step in range(300)]
        assert max(rates) == pytest.approx(3e-3, rel=1e-5) and int(np.argmax(rates)) == 29
        assert rates[0] == pytest.approx(3e-3 / 30, rel=1e-5)  # linear warm-up
        assert rates[119] == pytest.approx(3e-3 * (30 / 120) ** 0.5, rel=1e-5)  # 1/sqrt decay
        # The paper's numbers unchanged: d^-0.5 * min(n^-0.5, n w^-1.5) with w = 4000
        model.compile(num_train_steps=10 ** 6)
        schedule = model.optimizer._learning_rate
        assert schedule.warmup_steps == 4000 and schedule.scale == 1.0
        model.compile(learning_rate=1e-3, weight_decay=0.01)
        assert isinstance(model.optimizer, keras.optimizers.AdamW)

    def test_fit_learns_to_copy_and_generate_reproduces_it(self):
        rng = np.random.default_rng(0)
        features, labels = _copy_batch(rng, 64)
        model = _model(hidden_dim=32, intermediate_dim=64)
        model.compile(optimizer=keras.optimizers.Adam(3e-3, beta_2=0.98))
        history = model.fit(features, labels, batch_size=16, epochs=40, verbose=0).history
        assert history["loss"][-1] < 0.5 * history["loss"][0]
        for strategy in ("greedy", "beam"):
            out = np.asarray(model.generate(
                features["encoder_token_ids"][:8], features["encoder_padding_mask"][:8],
                max_length=6, start_id=START, end_id=END, strategy=strategy))
            expected = np.zeros((8, 6), "int32")
            expected[:, :5] = labels[:8]
            assert (out == expected).all(axis=1).mean() >= 0.75, (strategy, out, expected)

    @pytest.mark.parametrize("strategy", ["greedy", "beam"])
    def test_generate_ends_with_the_end_id_then_zeros(self, strategy):
        model = _model()

        def generate(end_id):
            return np.asarray(model.generate(SOURCE, SOURCE_MASK, max_length=6, start_id=START,
                                             end_id=end_id, strategy=strategy))

        free = generate(end_id=-1)  # no token ends
        assert free.shape == (2, 6) and free.dtype == np.int32
        # Declare the first token the model produces in row 0 the end id:
        # every row stops at its first end id, zeros after.
        end = int(free[0, 0])
        assert end != 0 and free.all()
        out = generate(end_id=end)
        for row in out:
            ends = np.flatnonzero(row == end)
            assert ends.size or not (row == 0).any()
            if ends.size:
                assert (row[ends[0] + 1:] == 0).all(), row
        assert (out == end).any()
        if strategy == "greedy":  # the same first step, now final
            assert out[0, 0] == end and not out[0, 1:].any()

    def test_generate_traces_in_tf_function_without_autograph(self):
        model = _model()
        spec = [tf.TensorSpec([None, None], tf.int32)] * 2
        for strategy in ("greedy", "beam"):
            def fn(source, mask, strategy=strategy):
                return model.generate(source, mask, max_length=6, start_id=START,
                                      end_id=END, strategy=strategy)

            traced = tf.function(fn, autograph=False, input_signature=spec)
            np.testing.assert_array_equal(traced(SOURCE, SOURCE_MASK).numpy(),
                                          np.asarray(fn(SOURCE, SOURCE_MASK)))

    def test_bad_generate_arguments_are_named(self):
        model = _model()
        with pytest.raises(ValueError, match="max_length"):
            model.generate(SOURCE, SOURCE_MASK, max_length=17, start_id=START, end_id=END)
        with pytest.raises(ValueError, match="strategy"):
            model.generate(SOURCE, SOURCE_MASK, max_length=4, start_id=START, end_id=END,
                           strategy="sample")

    def test_keras_round_trip(self):
        model = _model()
        features, _ = _copy_batch(np.random.default_rng(1), 2)
        self.run_serialization_test(model)
        restored = self.run_model_saving_test(model, features, atol=1e-5)
        assert restored.label_smoothing == pytest.approx(0.1)

    # 14 s: JAX traces generate's greedy and beam loops in a fresh process; the
    # default suite traces both loops without autograph (no Python control
    # flow on tensors, what JAX needs) and runs kerasbert code under JAX.
    @slow_covered_by(
        "tests/tasks/test_seq2seq_lm.py::TestSeq2SeqLM::test_generate_traces_in_tf_function_without_autograph",
        "tests/tasks/test_tasks_without_tensorflow.py::test_a_text_classifier_trains_under_jax_without_tensorflow")
    def test_generate_runs_under_jax(self, tmp_path):
        code = textwrap.dedent("""
            import numpy as np
            from kerasbert.models import TransformerBackbone
            from kerasbert.tasks import Seq2SeqLM
            lm = Seq2SeqLM(TransformerBackbone(30, 1, 2, 16, 32, max_sequence_length=16))
            src = np.array([[5, 6, 7, 1, 0], [8, 9, 1, 0, 0]], "int32")
            for strategy in ("greedy", "beam"):
                out = np.asarray(lm.generate(src, (src != 0).astype("int32"), max_length=5,
                                             start_id=2, end_id=1, strategy=strategy))
                assert out.shape == (2, 5) and out.dtype == np.int32, out
            print("ok")
        """)
        env = dict(os.environ, KERAS_BACKEND="jax")
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                env=env, cwd=tmp_path, timeout=300)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stdout.strip().endswith("ok")


@pytest.mark.parametrize("policy, strategy", [("mixed_float16", "beam"),
                                              ("mixed_bfloat16", "greedy")])
def test_half_precision_with_a_fully_padded_source(policy, strategy):
    model = _model(dtype=policy)
    source = np.array([[5, 6, 7, 1, 0], [0, 0, 0, 0, 0]], "int32")
    out = np.asarray(model.generate(source, (source != 0).astype("int32"), max_length=5,
                                    start_id=START, end_id=END, strategy=strategy))
    assert out.shape == (2, 5) and ((out >= 0) & (out < 30)).all()
    features = {"encoder_token_ids": source,
                "decoder_token_ids": np.array([[2, 5, 6], [2, 0, 0]], "int32")}
    labels = np.array([[5, 6, 1], [0, 0, 0]], "int32")
    assert np.isfinite(np.asarray(model(features))).all()
    if policy == "mixed_float16":  # the loss-scaled optimizer steps
        model.compile(jit_compile=False)  # one step: XLA's compile would dominate
        loss = model.fit(features, labels, epochs=1, verbose=0).history["loss"]
        assert np.isfinite(loss).all()
        assert np.isfinite(np.asarray(model(features))).all()
