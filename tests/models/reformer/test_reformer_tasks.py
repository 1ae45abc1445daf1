"""The Reformer under the zoo's tasks: causal LM (untied head, `.keras`
round trip, generation), masked LM on a bidirectional Reformer, and a
classifier; a bidirectional Reformer is refused as a causal LM."""

import keras
import numpy as np
import pytest

from kerasbert.models import ReformerBackbone
from kerasbert.saving import load_model
from kerasbert.tasks import BertPretrainer
from kerasbert.tasks import CausalLM
from kerasbert.tasks import TextClassifier

SMALL = dict(vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
             max_sequence_length=64, num_buckets=4, lsh_chunk_length=8, local_chunk_length=8,
             dropout=0.0)


def _batch(seed=0, length=48):
    rng = np.random.RandomState(seed)
    # A repeating pattern: learnable in a few steps.
    ids = (np.arange(length)[None] % 7 + 3 + rng.randint(0, 2, (2, 1)) * 7).astype("int32")
    mask = np.ones_like(ids)
    mask[1, 40:] = 0
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": np.zeros_like(ids)}


def test_causal_lm_trains_saves_and_generates(tmp_path):
    keras.utils.set_random_seed(1)
    lm = CausalLM(ReformerBackbone(**SMALL))
    assert lm.lm_decoder.shape == (40, 32)  # untied, 2 * hidden_dim wide
    lm.compile(optimizer=keras.optimizers.Adam(3e-3))
    batch = _batch()
    losses = [float(lm.train_on_batch(batch, return_dict=True)["loss"]) for _ in range(8)]
    assert losses[-1] < losses[0] - 0.3, losses
    path = str(tmp_path / "lm.keras")
    lm.save(path)
    again = load_model(path)
    np.testing.assert_allclose(np.asarray(again(batch)["logits"]),
                               np.asarray(lm(batch)["logits"]), atol=1e-5)
    new = again.generate([3, 4, 5], max_new_tokens=4)
    assert len(new) == 4 and all(0 <= t < 40 for t in new)


def test_masked_lm_on_a_bidirectional_reformer():
    keras.utils.set_random_seed(2)
    pretrainer = BertPretrainer(ReformerBackbone(**SMALL, causal=False), objectives=("mlm",))
    batch = dict(_batch(), masked_lm_positions=np.array([[1, 9, 20]] * 2, "int32"),
                 masked_lm_weights=np.ones((2, 3), "float32"))
    batch["masked_lm_ids"] = np.take_along_axis(batch["input_word_ids"],
                                                batch["masked_lm_positions"], 1)
    pretrainer.compile(optimizer=keras.optimizers.Adam(3e-3))
    losses = [float(pretrainer.train_on_batch(batch, return_dict=True)["loss"])
              for _ in range(6)]
    assert losses[-1] < losses[0], losses


def test_classifier_and_refusals():
    classifier = TextClassifier(ReformerBackbone(**SMALL), num_classes=3)
    out = np.asarray(classifier(_batch()))
    assert out.shape == (2, 3) and np.isfinite(out).all()
    with pytest.raises(ValueError, match="causal backbone"):
        CausalLM(ReformerBackbone(**SMALL, causal=False))


def test_mixed_precision_training_through_the_reversible_layers():
    # float16 activations, float32 weights and loss scaling: the recomputing
    # backward pass stays finite and the loss falls.
    keras.utils.set_random_seed(0)
    lm = CausalLM(ReformerBackbone(**SMALL, dtype="mixed_float16"))
    lm.compile(optimizer=keras.optimizers.Adam(3e-3))
    batch = _batch()
    losses = [float(lm.train_on_batch(batch, return_dict=True)["loss"]) for _ in range(6)]
    assert np.isfinite(losses).all() and losses[-1] < losses[0] - 0.3, losses
