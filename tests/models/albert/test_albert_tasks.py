"""The shared pretrainer and task models work on an ALBERT backbone."""

import numpy as np

from kerasbert.models import AlbertBackbone
from kerasbert.tasks import BertPretrainer
from kerasbert.tasks import TextClassifier
from kerasbert.testing import TestCase

KWARGS = dict(
    vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=16,
    intermediate_dim=32, embedding_dim=8, max_sequence_length=16,
)


def _features(batch=4, length=10, predictions=3, seed=0):
    rng = np.random.default_rng(seed)
    mask = np.ones((batch, length), "int32")
    mask[1:, length - 3:] = 0
    return {
        "input_word_ids": rng.integers(5, 40, (batch, length)).astype("int32") * mask,
        "input_mask": mask,
        "input_type_ids": (np.arange(length) >= 5).astype("int32")[None].repeat(batch, 0),
        "masked_lm_positions": rng.integers(1, 7, (batch, predictions)).astype("int32"),
        "masked_lm_ids": rng.integers(5, 40, (batch, predictions)).astype("int32"),
        "masked_lm_weights": np.ones((batch, predictions), "float32"),
        "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype("int32"),
    }


class TestAlbertTasks(TestCase):
    def test_pretrainer_with_sop(self):
        backbone = AlbertBackbone(**KWARGS)
        model = BertPretrainer(backbone, objectives=("mlm", "sop"))
        features = _features()
        out = model(features)
        assert out["mlm_logits"].shape == (4, 3, 40)
        assert out["sentence_logits"].shape == (4, 2)
        # The MLM transform maps hidden 16 -> embedding 8, then the decoder
        # is the (tied) [40, 8] token table.
        assert tuple(model.masked_lm_head.dense.kernel.shape) == (16, 8)
        model.compile(run_eagerly=True)  # eager: one step skips tracing
        before = backbone.token_embedding.embeddings.numpy().copy()
        logs = model.train_on_batch(features, return_dict=True)
        assert np.isfinite(logs["loss"])
        assert "sentence_accuracy" in logs
        assert not np.allclose(before, backbone.token_embedding.embeddings.numpy())

    def test_text_classifier(self):
        model = TextClassifier(AlbertBackbone(**KWARGS), num_classes=3)
        features = {k: v for k, v in _features().items() if k.startswith("input_")}
        assert model(features).shape == (4, 3)
        model.compile(run_eagerly=True)  # eager: one step skips tracing
        logs = model.train_on_batch(
            features, np.array([0, 1, 2, 1]), return_dict=True
        )
        assert np.isfinite(logs["loss"])
