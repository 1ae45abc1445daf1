import keras
import numpy as np
import pytest

from kerasbert.models import from_preset
from kerasbert.models import list_presets
from kerasbert.models.distil_bert import DistilBertBackbone
from kerasbert.tasks import BertPretrainer
from kerasbert.tasks import MultipleChoice
from kerasbert.tasks import TextClassifier
from kerasbert.testing import TestCase
from kerasbert.testing import tiny_encoder_config
from kerasbert.testing import tiny_encoder_inputs

KWARGS = tiny_encoder_config()
INPUTS = tiny_encoder_inputs()


class TestDistilBertBackbone(TestCase):
    def test_backbone_basics(self):
        # The shared checks; type ids are ignored (no segment table).
        self.run_backbone_test(DistilBertBackbone)

    def test_no_pooler_or_segments(self):
        model = DistilBertBackbone(**KWARGS)
        assert model.pooler is None
        assert model.embeddings.segment_embedding is None
        assert not any("pooler" in w.path or "segment" in w.path for w in model.weights)
        assert model.token_embedding is model.embeddings.token_embedding
        assert model.classifier_activation == "relu"

    def test_pooled_output_is_cls(self):
        out = DistilBertBackbone(**KWARGS)(INPUTS)
        self.assertAllClose(out["pooled_output"], out["sequence_output"][:, 0], atol=0)

    def test_uses_erf_gelu(self):
        model = DistilBertBackbone(**KWARGS)
        assert {b.activation for b in model.transformer_layers} == {"gelu"}

    def test_masked_lm_pretrainer(self):
        """BertPretrainer builds its MLM head from the backbone's attributes
        (tied to the token table) and trains (MLM only: no pooler)."""
        pretrainer = BertPretrainer(DistilBertBackbone(**KWARGS), objectives=("mlm",))
        batch = dict(INPUTS, masked_lm_positions=np.array([[1, 2], [3, 0]], "int32"),
                     masked_lm_ids=np.array([[4, 5], [6, 0]], "int32"),
                     masked_lm_weights=np.array([[1, 1], [1, 0]], "float32"))
        assert pretrainer(batch)["mlm_logits"].shape == (2, 2, 50)
        assert pretrainer.masked_lm_head.token_embedding is pretrainer.backbone.token_embedding
        import tensorflow as tf

        with tf.GradientTape() as tape:
            loss = pretrainer.compute_loss(batch, y_pred=pretrainer(batch, training=True))
        grads = tape.gradient(loss, pretrainer.trainable_variables)
        assert np.isfinite(float(loss))
        assert all(g is not None for g in grads)


class TestDistilBertHeads(TestCase):
    """Without a pooler the classifiers add DistilBERT's pre-classifier."""

    def test_text_classifier_pre_classifier(self):
        backbone = DistilBertBackbone(**KWARGS)
        model = TextClassifier(backbone, num_classes=3)
        assert model.pre_classifier.name == "pre_classifier"
        assert model.pre_classifier.activation is keras.activations.relu
        assert model(INPUTS).shape == (2, 3)
        assert model.count_params() == backbone.count_params() + 16 * 16 + 16 + 16 * 3 + 3
        # Logits = Dense(relu(Dense([CLS]))) with dropout off.
        cls = backbone(INPUTS)["pooled_output"]
        hidden = np.maximum(np.asarray(model.pre_classifier(cls)), 0)
        self.assertAllClose(model.output_dense(hidden), model(INPUTS), atol=1e-6)
        self.run_model_saving_test(model, INPUTS)

    def test_multiple_choice_pre_classifier(self):
        model = MultipleChoice(DistilBertBackbone(**KWARGS), num_choices=2)
        assert model.pre_classifier is not None
        choices = {k: np.stack([v, v[::-1]], axis=1) for k, v in INPUTS.items()}
        assert model(choices).shape == (2, 2)

    def test_bert_heads_unchanged(self):
        from kerasbert.models import BertBackbone

        model = TextClassifier(BertBackbone(**KWARGS), num_classes=3)
        assert model.pre_classifier is None
        assert not any("pre_classifier" in w.path for w in model.weights)


class TestDistilBertPresets(TestCase):
    def test_distilbert_base_parameter_count(self):
        model = DistilBertBackbone.from_preset("distilbert_base")
        assert model.count_params() == 66362880
        assert (model.num_layers, model.hidden_dim, model.num_heads) == (6, 768, 12)
        assert "distilbert_base" in list_presets()
        assert type(from_preset("distilbert_base", num_layers=1)) is DistilBertBackbone

    def test_overrides_and_wrong_family(self):
        model = DistilBertBackbone.from_preset("distilbert_base", num_layers=1,
                                               vocabulary_size=100)
        assert (model.num_layers, model.vocabulary_size) == (1, 100)
        with pytest.raises(ValueError, match="BertBackbone, not a DistilBertBackbone"):
            DistilBertBackbone.from_preset("bert_tiny")
        with pytest.raises(ValueError, match="num_segments"):
            DistilBertBackbone.from_preset("distilbert_base", num_segments=2)
