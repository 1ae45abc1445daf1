import math

import numpy as np
import pytest

from kerasbert.layers import SinusoidalPositionEncoding
from kerasbert.layers.sinusoidal_position_encoding import sinusoid_table
from kerasbert.testing import TestCase


class TestSinusoidalPositionEncoding(TestCase):
    def test_layer_basics(self):
        layer = self.run_layer_test(
            SinusoidalPositionEncoding, {"max_sequence_length": 16},
            np.zeros((2, 5, 8), "float32"), (2, 5, 8), expected_num_trainable_weights=0,
            run_training_check=False)
        assert not layer.weights

    def test_interleaved_is_the_papers_formula(self):
        table = sinusoid_table(10, 8, "interleaved")
        for pos in (0, 3, 9):
            for i in range(4):
                angle = pos / 10000 ** (2 * i / 8)
                assert table[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-6)
                assert table[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-6)

    def test_concatenated_is_model_gardens_table(self):
        from official.nlp.modeling.layers import RelativePositionEmbedding

        peer = RelativePositionEmbedding(hidden_size=12)(None, length=40).numpy()
        ours = sinusoid_table(40, 12, "concatenated")
        np.testing.assert_allclose(ours, peer, atol=1e-6)
        # ... and differs from the paper's layout.
        assert np.abs(ours - sinusoid_table(40, 12, "interleaved")).max() > 0.1

    def test_start_index_reads_the_rows_of_a_decoding_step(self):
        layer = SinusoidalPositionEncoding(16)
        x = np.zeros((2, 1, 8), "float32")
        table = sinusoid_table(16, 8)
        np.testing.assert_allclose(np.asarray(layer(x, start_index=5)), np.broadcast_to(
            table[5:6], (2, 1, 8)), atol=1e-7)

    def test_bad_arguments_are_named(self):
        with pytest.raises(ValueError, match="layout"):
            SinusoidalPositionEncoding(8, layout="rotary")
        with pytest.raises(ValueError, match="even width"):
            sinusoid_table(4, 7)
        with pytest.raises(ValueError, match="max_sequence_length"):
            SinusoidalPositionEncoding(0)
