"""BertPretrainer: outputs, the weighted MLM + sentence loss against NumPy,
metrics, objectives, serialization, .keras saving, fit on our TFRecords,
mixed precision, TF1 head interop, MirroredStrategy parity, learning."""

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

from kerasbert.models import BertBackbone
from kerasbert.tasks import BertPretrainer
from kerasbert.testing import TestCase

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "data"))
from pretrain_fixtures import write_vocab  # noqa: E402
from slow_marks import slow_covered_by  # noqa: E402

V, T, P, B = 60, 16, 4, 4
TINY = dict(
    vocabulary_size=V, num_layers=2, num_heads=2, hidden_dim=32,
    intermediate_dim=64, max_sequence_length=T, dropout=0.0,
)


def make_batch(seed=0, batch=B, vocab=V):
    rng = np.random.RandomState(seed)
    weights = np.ones((batch, P), "float32")
    weights[0, 2:] = 0.0  # padded predictions must not count
    weights[1, 1:] = 0.0
    mask = np.ones((batch, T), "int32")
    mask[-1, T // 2:] = 0
    return {
        "input_word_ids": rng.randint(0, vocab, (batch, T)).astype("int32"),
        "input_mask": mask,
        "input_type_ids": (np.arange(T) >= T // 2).astype("int32")[None].repeat(batch, 0),
        "masked_lm_positions": rng.randint(1, T // 2, (batch, P)).astype("int32"),
        "masked_lm_ids": rng.randint(0, vocab, (batch, P)).astype("int32"),
        "masked_lm_weights": weights,
        "next_sentence_labels": rng.randint(0, 2, (batch,)).astype("int32"),
    }


def log_softmax(x):
    x = x.astype("float64")
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def numpy_loss(batch, outputs):
    logp = log_softmax(np.asarray(outputs["mlm_logits"]))
    ce = -np.take_along_axis(logp, batch["masked_lm_ids"][..., None], -1)[..., 0]
    w = batch["masked_lm_weights"]
    loss = (w * ce).sum() / w.sum()
    if "sentence_logits" in outputs:
        slogp = log_softmax(np.asarray(outputs["sentence_logits"]))
        labels = batch["next_sentence_labels"]
        loss += -slogp[np.arange(len(labels)), labels].mean()
    return loss


class TestBertPretrainer(TestCase):
    def test_outputs_shapes_and_dtypes(self):
        model = BertPretrainer(BertBackbone(**TINY))
        out = model(make_batch())  # the label keys are ignored
        assert set(out) == {"mlm_logits", "mlm_hidden", "sentence_logits"}
        assert tuple(out["mlm_logits"].shape) == (B, P, V)
        assert tuple(out["mlm_hidden"].shape) == (B, P, TINY["hidden_dim"])
        assert tuple(out["sentence_logits"].shape) == (B, 2)
        assert all(v.dtype == "float32" for v in out.values())
        assert isinstance(model.backbone, BertBackbone)
        # The decoder is the backbone's embedding table (no second V x H).
        assert model.masked_lm_head.token_embedding is model.backbone.token_embedding
        ids = [id(w) for w in model.trainable_weights]
        assert len(ids) == len(set(ids))

    @pytest.mark.parametrize("objectives", [("mlm", "nsp"), ("mlm",)])
    def test_loss_matches_numpy(self, objectives):
        model = BertPretrainer(BertBackbone(**TINY), objectives=objectives)
        batch = make_batch(1)
        outputs = model(batch)
        expected = numpy_loss(batch, outputs)
        loss = model.compute_loss(x=batch, y_pred=outputs)
        np.testing.assert_allclose(float(loss), expected, rtol=1e-5)
        terms = {k: float(v) for k, v in model.loss_terms(batch, outputs).items()}
        assert terms["mlm_weight_sum"] == batch["masked_lm_weights"].sum()
        if len(objectives) == 1:
            assert terms["sentence_count"] == terms["sentence_loss_sum"] == 0
        else:
            assert terms["sentence_count"] == B
        combined = BertPretrainer.combine_loss_terms(model.loss_terms(batch, outputs))
        np.testing.assert_allclose(float(combined), expected, rtol=1e-5)
        # All weights zero: a finite loss (sentence part only), no NaN.
        empty = dict(batch, masked_lm_weights=np.zeros_like(batch["masked_lm_weights"]))
        assert np.isfinite(float(model.compute_loss(x=empty, y_pred=outputs)))

    def test_loss_decodes_the_hidden_vectors_like_the_logits(self):
        """The loss reads `mlm_hidden` through the head's fused decoder +
        cross-entropy (kernels.decoder_cross_entropy, vocabulary-major
        inside); it and its gradients equal the loss from `mlm_logits`, and
        training and inference give the same keys (dropout 0)."""
        import tensorflow as tf

        model = BertPretrainer(BertBackbone(**TINY))
        batch = make_batch(3)
        with tf.GradientTape(persistent=True) as tape:
            outputs = model(batch, training=True)
            fast = model.compute_loss(x=batch, y_pred=outputs)
            plain = model.compute_loss(
                x=batch, y_pred={k: v for k, v in outputs.items() if k != "mlm_hidden"})
        assert set(outputs) == set(model(batch)) == {"mlm_logits", "mlm_hidden",
                                                     "sentence_logits"}
        np.testing.assert_allclose(float(fast), float(plain), rtol=1e-6)
        np.testing.assert_allclose(float(fast), numpy_loss(batch, outputs), rtol=1e-5)
        weights = model.trainable_weights
        for a, b in zip(tape.gradient(fast, weights), tape.gradient(plain, weights)):
            np.testing.assert_allclose(tf.convert_to_tensor(a), tf.convert_to_tensor(b),
                                       rtol=1e-4, atol=1e-6)

    def test_metrics_on_a_constructed_batch(self):
        model = BertPretrainer(BertBackbone(**TINY))
        batch = make_batch(2)
        ids, labels = batch["masked_lm_ids"], batch["next_sentence_labels"]
        logits = np.full((B, P, V), -5.0, "float32")
        right = np.zeros((B, P), bool)
        right[:, ::2] = True  # positions 0 and 2 predicted right
        for b in range(B):
            for p in range(P):
                logits[b, p, ids[b, p] if right[b, p] else (ids[b, p] + 1) % V] = 5.0
        s_logits = np.zeros((B, 2), "float32")
        s_logits[np.arange(B), labels] = 1.0
        s_logits[0] = s_logits[0, ::-1]  # one sentence wrong
        outputs = {"mlm_logits": logits, "sentence_logits": s_logits}
        model.compute_loss(x=batch, y_pred=outputs)
        w = batch["masked_lm_weights"]
        results = {k: float(v) for k, v in model.compute_metrics(batch, None, outputs).items()}
        np.testing.assert_allclose(results["mlm_accuracy"], (w * right).sum() / w.sum())
        np.testing.assert_allclose(results["sentence_accuracy"], (B - 1) / B)
        terms = model.loss_terms(batch, outputs)
        np.testing.assert_allclose(float(terms["mlm_correct_sum"]), (w * right).sum())
        np.testing.assert_allclose(float(terms["sentence_correct_sum"]), B - 1)
        np.testing.assert_allclose(
            results["mlm_loss"] + results["sentence_loss"], numpy_loss(batch, outputs),
            rtol=1e-5)
        model.reset_metrics()
        assert float(model.mlm_accuracy.result()) == 0.0

    def test_objectives(self):
        backbone = BertBackbone(**TINY)
        mlm_only = BertPretrainer(backbone, objectives=("mlm",))
        assert mlm_only.next_sentence_head is None
        assert set(mlm_only(make_batch())) == {"mlm_logits", "mlm_hidden"}
        assert not any("next_sentence" in w.path for w in mlm_only.weights)
        sop = BertPretrainer(backbone, objectives=["MLM", "sop"])
        assert sop.objectives == ("mlm", "sop") and sop.next_sentence_head is not None
        for bad in [("nsp",), ("mlm", "nsp", "sop"), ("mlm", "xyz"), "sop", 3]:
            with pytest.raises(ValueError, match="objectives must be one of"):
                BertPretrainer(backbone, objectives=bad)

    def test_serialization_and_keras_saving(self, tmp_path):
        model = BertPretrainer(BertBackbone(**TINY), objectives=("mlm", "sop"))
        revived = self.run_serialization_test(model)
        assert revived.objectives == ("mlm", "sop")
        batch = make_batch()
        model.compile(run_eagerly=True)  # eager: a 1-step fit skips tracing
        model.fit(batch, batch_size=B, epochs=1, verbose=0)
        restored = self.run_model_saving_test(model, batch)
        assert isinstance(restored.backbone, BertBackbone)
        # Recompiled with the optimizer state (step counter, no-decay names).
        assert int(restored.optimizer.iterations) == 1
        gamma = next(w for w in restored.trainable_weights if w.path.endswith("gamma"))
        assert not restored.optimizer.uses_weight_decay(gamma)
        restored.fit(batch, batch_size=B, epochs=1, verbose=0)

    def test_loss_argument_rejected(self):
        model = BertPretrainer(BertBackbone(**TINY))
        with pytest.raises(ValueError, match="own loss"):
            model.compile(loss="mse")

    def test_auto_optimizer_excludes_layer_norm_and_bias(self):
        model = BertPretrainer(BertBackbone(**TINY))
        model.compile()
        opt = model.optimizer
        decayed = {w.path for w in model.trainable_weights if opt.uses_weight_decay(w)}
        assert any("token_embedding" in p for p in decayed)
        assert any("kernel" in p for p in decayed)
        assert not any(p.endswith(("bias", "gamma", "beta")) for p in decayed)

    @pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
    def test_mixed_precision_fit(self, policy):
        keras.config.set_dtype_policy(policy)
        model = BertPretrainer(BertBackbone(**TINY))
        model.compile(run_eagerly=True)
        scaled = isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
        assert scaled == (policy == "mixed_float16")
        batch = make_batch()
        # Logits are float32 under any policy; mlm_hidden is in the compute dtype.
        assert all(v.dtype == "float32" for k, v in model(batch).items() if k.endswith("logits"))
        history = model.fit(batch, batch_size=B, epochs=1, verbose=0)
        self.assertAllFinite(history.history["loss"])
        self.assertAllFinite([w.numpy() for w in model.trainable_weights])

    def test_policy_follows_the_backbone(self):
        model = BertPretrainer(BertBackbone(**TINY, dtype="mixed_float16"))
        assert model.dtype_policy.name == "mixed_float16"
        model.compile()
        assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """A tiny repetitive corpus -> our writer's NSP TFRecords (T=32, P=5)."""
    from kerasbert.data import create_pretraining_data

    d = tmp_path_factory.mktemp("pretrain")
    vocab = write_vocab(str(d))
    sentences = [
        "the cat sat on the mat .",
        "a big dog ran under the tree .",
        "the small bird sings quickly .",
        "a red house by the blue river .",
    ]
    with open(d / "corpus.txt", "w", encoding="utf-8") as f:
        for i in range(60):
            for j in range(4):
                f.write(sentences[(i + j) % 4] + "\n")
            f.write("\n")
    out = str(d / "records")
    create_pretraining_data(
        [str(d / "corpus.txt")], vocab, out, sequence_length=32,
        max_predictions_per_seq=5, dupe_factor=4, progress=False)
    vocab_size = sum(1 for _ in open(vocab, encoding="utf-8"))
    return out, vocab, vocab_size


def test_fit_and_evaluate_on_tfrecords(records):
    from kerasbert.data import pretraining_dataset

    folder, vocab, vocab_size = records
    model = BertPretrainer(BertBackbone(**dict(TINY, vocabulary_size=vocab_size,
                                               max_sequence_length=32)))
    model.compile(run_eagerly=True)
    ds = pretraining_dataset(folder, 8, seed=1, vocab_file=vocab)
    history = model.fit(ds, steps_per_epoch=3, epochs=2, verbose=0)
    for name in ("loss", "mlm_loss", "mlm_accuracy", "sentence_loss", "sentence_accuracy"):
        assert len(history.history[name]) == 2, name
        assert np.isfinite(history.history[name]).all(), name
    result = model.evaluate(pretraining_dataset(folder, 8, repeat=False, shuffle=False),
                            steps=3, return_dict=True, verbose=0)
    assert 0.0 <= result["mlm_accuracy"] <= 1.0 and np.isfinite(result["loss"])


# 18 s: 400 steps to a masked-LM loss below 1.0; the default suite fits and
# evaluates on the same records (6 steps).
@slow_covered_by("tests/tasks/test_bert_pretrainer.py::test_fit_and_evaluate_on_tfrecords")
def test_learns_a_repetitive_corpus(records):
    """Stated bound: the mean MLM loss of steps 301-400 (batch 16, four
    repeated sentences, ln V = 4.6 at the start) is below 1.0 (measured
    about 0.5; steps 1-100 average about 2.6)."""
    from kerasbert.data import pretraining_dataset

    folder, vocab, vocab_size = records
    backbone = BertBackbone(**dict(TINY, vocabulary_size=vocab_size,
                                   max_sequence_length=32, hidden_dim=64,
                                   intermediate_dim=128))
    model = BertPretrainer(backbone)
    model.compile(optimizer=keras.optimizers.Adam(2e-3))
    ds = pretraining_dataset(folder, 16, seed=2, vocab_file=vocab)
    history = model.fit(ds, steps_per_epoch=100, epochs=4, verbose=0)
    mlm = history.history["mlm_loss"]
    print(f"repetitive corpus masked-LM loss {mlm[0]:.3f} -> {mlm[-1]:.3f}")
    assert mlm[-1] < 1.0 and mlm[-1] < mlm[0] / 2, mlm


def test_heads_round_trip_through_a_tf1_checkpoint(tmp_path):
    from kerasbert.convert.tf1_checkpoint import load_bert_checkpoint
    from kerasbert.convert.tf1_checkpoint import load_pretraining_heads
    from kerasbert.convert.tf1_checkpoint import save_bert_checkpoint

    model = BertPretrainer(BertBackbone(**TINY))
    for w in model.weights:  # non-trivial values everywhere
        w.assign(np.random.RandomState(len(w.path)).normal(0, 0.05, w.shape))
    prefix = str(tmp_path / "bert_model.ckpt")
    save_bert_checkpoint(model.backbone, prefix, model.masked_lm_head,
                         model.next_sentence_head)
    backbone = load_bert_checkpoint(prefix, str(tmp_path / "bert_config.json"))
    mlm, nsp = load_pretraining_heads(prefix, backbone)
    loaded = BertPretrainer(backbone)
    for ours, theirs in ((loaded.masked_lm_head, mlm), (loaded.next_sentence_head, nsp)):
        assert ours.name == theirs.name
        for a, b in zip(ours.weights, theirs.weights):
            assert a.path.split("/", 1)[-1] == b.path.split("/", 1)[-1]
            a.assign(b)
    batch = make_batch()
    TestCase().assertAllClose(model(batch), loaded(batch), atol=1e-5)


MIRRORED_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    import keras
    from kerasbert.models import BertBackbone
    from kerasbert.tasks import BertPretrainer

    TINY = json.loads(sys.argv[1])
    rng = np.random.RandomState(0)
    N, T, P, V = 8, 16, 4, TINY["vocabulary_size"]
    # Replica 0 gets rows 0-3 (16 real predictions), replica 1 rows 4-7
    # (fewer): only globally summed denominators give the global mean.
    weights = (rng.rand(N, P) < 0.4).astype("float32")
    weights[:4] = 1.0
    weights[4, 0] = 1.0
    data = {
        "input_word_ids": rng.randint(0, V, (N, T)).astype("int32"),
        "input_mask": (np.arange(T)[None] < rng.randint(6, T + 1, (N, 1))).astype("int32"),
        "input_type_ids": np.zeros((N, T), "int32"),
        "masked_lm_positions": rng.randint(0, 6, (N, P)).astype("int32"),
        "masked_lm_ids": rng.randint(0, V, (N, P)).astype("int32"),
        "masked_lm_weights": weights,
        "next_sentence_labels": rng.randint(0, 2, (N,)).astype("int32"),
    }

    def top2_margin(logits):
        top = np.sort(np.asarray(logits, "float64"), axis=-1)
        return top[..., -1] - top[..., -2]

    # Before each step: how many weighted predictions have a top-2 logit
    # margin under 1e-4 (float noise between the strategies could flip
    # their argmax, and so the accuracies).
    class NearTies(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.mlm, self.sentence = [], []

        def on_train_batch_begin(self, batch, logs=None):
            out = self.model(data)
            self.mlm.append(int(((top2_margin(out["mlm_logits"]) < 1e-4)
                                 * data["masked_lm_weights"]).sum()))
            self.sentence.append(int((top2_margin(out["sentence_logits"]) < 1e-4).sum()))

    def run(strategy, init, eager, callbacks=()):
        with strategy.scope():
            model = BertPretrainer(BertBackbone(**TINY))
            model.set_weights(init)
            model.compile(optimizer=keras.optimizers.SGD(0.1), run_eagerly=eager)
        ds = tf.data.Dataset.from_tensor_slices(data).batch(8).repeat()
        hist = model.fit(ds, steps_per_epoch=1, epochs=4, verbose=0,
                         callbacks=list(callbacks)).history
        return model, {k: [float(x) for x in v] for k, v in hist.items()}

    keras.utils.set_random_seed(0)
    init = BertPretrainer(BertBackbone(**TINY)).get_weights()
    # The reference runs eagerly on one device (no tracing: faster here).
    ties = NearTies()
    single, h1 = run(tf.distribute.OneDeviceStrategy("/cpu:0"), init, True, [ties])
    mirrored, h2 = run(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), init, False)
    diff = max(float(np.abs(a - b).max())
               for a, b in zip(single.get_weights(), mirrored.get_weights()))
    print(json.dumps({"single": h1, "mirrored": h2, "weight_diff": diff,
                      "replicas": 2, "mlm_near_ties": ties.mlm,
                      "sentence_near_ties": ties.sentence,
                      "mlm_predictions": float(data["masked_lm_weights"].sum()),
                      "sentences": N}))
""")


def test_mirrored_strategy_matches_single_device():
    """MirroredStrategy over 2 logical CPUs, one global batch of 8 (4 per
    replica) with uneven masked_lm_weights per replica, 4 SGD steps: the
    per-step losses are within 1e-4 relative of one device, the accuracies
    equal up to predictions in a near tie, the final weights within 1e-5 (measured: ~1e-7; a per-replica mean, as
    Keras' own losses do, is off by ~2e-3 in the loss)."""
    import json

    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, "-c", MIRRORED_SCRIPT, json.dumps(TINY)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    single, mirrored = out["single"], out["mirrored"]
    assert np.all(np.diff(single["loss"]) < 0), single["loss"]  # it trains
    for name in ("loss", "mlm_loss", "sentence_loss"):
        np.testing.assert_allclose(mirrored[name], single[name], rtol=1e-4, atol=1e-6,
                                   err_msg=name)
    # Accuracies count argmax decisions: exact, except that each prediction
    # whose top-2 margin is within float noise may flip (the script counts
    # them before every step; there are few, so the check still bites).
    for name, ties, total in (("mlm_accuracy", "mlm_near_ties", "mlm_predictions"),
                              ("sentence_accuracy", "sentence_near_ties", "sentences")):
        slack = np.asarray(out[ties]) / out[total]
        assert sum(out[ties]) <= 2, (ties, out[ties])
        assert np.all(np.abs(np.subtract(mirrored[name], single[name])) <= slack + 1e-6), (
            name, single[name], mirrored[name], out[ties])
    assert out["weight_diff"] < 1e-5, out["weight_diff"]


@pytest.mark.parametrize("family", ["BertBackbone", "RobertaBackbone", "AlbertBackbone"])
def test_sparse_last_layer_equals_the_full_encoder(family):
    """The last layer run at [first token, masked positions] only gives the
    logits, the loss and the gradients of the full encoder (dropout off)."""
    import tensorflow as tf

    from kerasbert import models

    extra = {"embedding_dim": 8} if family == "AlbertBackbone" else {}
    backbone = getattr(models, family)(vocabulary_size=V, num_layers=2, num_heads=2,
                                       hidden_dim=16, intermediate_dim=32,
                                       max_sequence_length=T, dropout=0.0, **extra)
    objectives = ("mlm",) if family == "RobertaBackbone" else ("mlm", "nsp")
    sparse = BertPretrainer(backbone, objectives=objectives)
    full = BertPretrainer(backbone, objectives=objectives, sparse_last_layer=False)
    full.set_weights(sparse.get_weights())
    assert sparse._split_encoder is not None and full._split_encoder is None
    batch = make_batch(seed=3)
    results = []
    for model in (sparse, full):
        with tf.GradientTape() as tape:
            outputs = model(batch, training=True)
            loss = model.combine_loss_terms(model.loss_terms(batch, outputs))
        grads = tape.gradient(loss, model.trainable_variables)
        results.append((outputs, float(loss), [np.asarray(tf.convert_to_tensor(g)) for g in grads]))
    (a, loss_a, grads_a), (b, loss_b, grads_b) = results
    for key in a:
        np.testing.assert_allclose(np.asarray(a[key]), np.asarray(b[key]), atol=1e-5)
    assert abs(loss_a - loss_b) < 1e-5
    assert len(grads_a) == len(grads_b) == len(sparse.trainable_variables)
    for ga, gb in zip(grads_a, grads_b):
        np.testing.assert_allclose(ga, gb, atol=1e-5)
    assert BertPretrainer.from_config(
        {**sparse.get_config(), "backbone": backbone}).sparse_last_layer is True


def test_sparse_last_layer_falls_back_where_it_cannot_apply():
    from kerasbert import models

    one_layer = BertBackbone(vocabulary_size=V, num_layers=1, num_heads=2, hidden_dim=16,
                             intermediate_dim=32, max_sequence_length=T)
    assert BertPretrainer(one_layer)._split_encoder is None
    inner = models.AlbertBackbone(vocabulary_size=V, num_layers=2, num_heads=2, hidden_dim=16,
                                  intermediate_dim=32, embedding_dim=8, num_inner_repetitions=2,
                                  max_sequence_length=T)
    assert BertPretrainer(inner)._split_encoder is None  # two blocks per layer
    causal = models.GptBackbone(vocabulary_size=V, num_layers=2, num_heads=2, hidden_dim=16,
                                intermediate_dim=32, max_sequence_length=T)
    assert BertPretrainer(causal, objectives=("mlm",))._split_encoder is None
