"""RoBERTa drops into the BERT task models unchanged."""

import numpy as np

from kerasbert.models.roberta import RobertaBackbone
from kerasbert.tasks.text_classifier import TextClassifier
from kerasbert.testing import TestCase

KWARGS = dict(
    vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=16,
    intermediate_dim=32, max_sequence_length=12,
)
INPUTS = {
    "input_word_ids": np.array([[0, 5, 6, 2, 1, 1], [0, 7, 2, 2, 8, 2]], "int32"),
    "input_mask": np.array([[1, 1, 1, 1, 0, 0], [1] * 6], "int32"),
    "input_type_ids": np.zeros((2, 6), "int32"),
}


class TestRobertaInTasks(TestCase):
    def test_classifier_adds_dense_tanh_head_and_saves(self):
        model = TextClassifier(RobertaBackbone(**KWARGS), num_classes=3)
        assert model.pre_classifier is not None
        assert model.pre_classifier.get_config()["activation"] == "tanh"
        assert model(INPUTS).shape == (2, 3)
        self.run_model_saving_test(model, INPUTS, atol=1e-5)
