"""ELMo's layers: CharacterCNN, Highway, ProjectedLSTM, ScalarMix."""

import numpy as np

from kerasbert.layers import CharacterCNN
from kerasbert.layers import Highway
from kerasbert.layers import ProjectedLSTM
from kerasbert.layers import ScalarMix
from kerasbert.layers.projected_lstm import reverse_padded
from kerasbert.testing import TestCase

RNG = np.random.default_rng(7)
CHAR_IDS = RNG.integers(1, 40, (2, 3, 8)).astype("int32")
CHAR_IDS[1, 2] = 0  # a padded word
X = RNG.standard_normal((2, 5, 6)).astype("float32")
MASK = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], "int32")


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


class TestCharacterCNN(TestCase):
    def test_layer_and_values(self):
        layer = self.run_layer_test(
            CharacterCNN, dict(num_characters=40, embedding_dim=4, filters=[[1, 3], [3, 5]]),
            CHAR_IDS, (2, 3, 8), expected_num_trainable_weights=5)
        table, k0, b0, k1, b1 = (np.asarray(w) for w in layer.get_weights())
        assert table.shape == (39, 4)  # ids 1..39: id 0 (padding) has no row
        out = np.asarray(layer(CHAR_IDS))
        x = table[CHAR_IDS[0, 1] - 1]  # row 0 of the table is id 1
        conv1 = np.stack([np.einsum("wd,wdn->n", x[t:t + 3], k1) for t in range(6)]) + b1
        expected = np.concatenate([np.maximum((x @ k0[0]).max(0) + b0, 0),
                                   np.maximum(conv1.max(0), 0)])
        np.testing.assert_allclose(out[0, 1], expected, atol=1e-5)
        # Id 0 embeds to zeros: a padded word is relu(bias) in every filter.
        np.testing.assert_allclose(out[1, 2], np.maximum(np.concatenate([b0, b1]), 0), atol=1e-6)

    def test_refuses_other_activations(self):
        try:
            CharacterCNN(activation="gelu")
        except ValueError as err:
            assert "relu or tanh" in str(err)
        else:
            raise AssertionError("gelu accepted")


class TestHighway(TestCase):
    def test_layer_and_values(self):
        layer = self.run_layer_test(Highway, dict(num_layers=2), X, (2, 5, 6),
                                    expected_num_trainable_weights=8)
        wc, bc, wt, bt = (np.asarray(w) for w in layer.get_weights()[:4])
        assert (bc == -2.0).all()  # the published carry-bias start
        g = _sigmoid(X @ wc + bc)
        first = g * np.maximum(X @ wt + bt, 0) + (1 - g) * X
        wc, bc, wt, bt = (np.asarray(w) for w in layer.get_weights()[4:])
        g = _sigmoid(first @ wc + bc)
        expected = g * np.maximum(first @ wt + bt, 0) + (1 - g) * first
        np.testing.assert_allclose(np.asarray(layer(X)), expected, atol=1e-5)

    def test_zero_layers_is_the_identity(self):
        layer = Highway(0)
        np.testing.assert_array_equal(np.asarray(layer(X)), X)
        assert not layer.weights


def _numpy_lstm(layer, x, forget_bias=1.0):
    kernel, bias, proj = (np.asarray(w, "float64") for w in layer.get_weights())
    units = proj.shape[0]
    c, h, out = np.zeros(units), np.zeros(proj.shape[1]), []
    for step in x:
        z = np.concatenate([step, h]) @ kernel + bias
        i, j, f, o = np.split(z, 4)
        c = np.clip(_sigmoid(f + forget_bias) * c + _sigmoid(i) * np.tanh(j), -3, 3)
        h = np.clip((_sigmoid(o) * np.tanh(c)) @ proj, -3, 3)
        out.append(h)
    return np.stack(out)


class TestProjectedLSTM(TestCase):
    def test_layer(self):
        layer = self.run_layer_test(ProjectedLSTM, dict(units=8, projection_dim=4), (X, MASK),
                                    (2, 5, 4), expected_num_trainable_weights=3)
        # TF1 LSTMCell's layout: [inputs; h] x 4 gates, bias, projection.
        assert [tuple(w.shape) for w in layer.weights] == [(10, 32), (32,), (8, 4)]

    def test_forward_and_backward_match_numpy(self):
        for backwards in (False, True):
            layer = ProjectedLSTM(8, 4, go_backwards=backwards)
            out = np.asarray(layer(X, MASK))
            for b, n in enumerate(MASK.sum(1)):
                rows = X[b, :n][::-1] if backwards else X[b, :n]
                expected = _numpy_lstm(layer, rows)
                expected = expected[::-1] if backwards else expected
                np.testing.assert_allclose(out[b, :n], expected, atol=1e-5)
                assert not out[b, n:].any(), "padded steps must be zeros"

    def test_clips_bind(self):
        # Large weights: without the clips the projected output would pass 3.
        layer = ProjectedLSTM(8, 4, cell_clip=0.5, projection_clip=0.25)
        layer.build(X.shape)
        layer.set_weights([w * 20 for w in layer.get_weights()])
        out = np.asarray(layer(X, MASK))
        assert np.abs(out).max() <= 0.25 + 1e-6
        assert np.isclose(np.abs(out).max(), 0.25)

    def test_reverse_padded_is_its_own_inverse(self):
        lengths = MASK.sum(1)
        once = np.asarray(reverse_padded(X, lengths))
        assert np.array_equal(once[0, :3], X[0, 2::-1]) and np.array_equal(once[0, 3:], X[0, 3:])
        assert np.array_equal(once[1], X[1, ::-1])
        assert np.array_equal(np.asarray(reverse_padded(once, lengths)), X)


class TestScalarMix(TestCase):
    def test_layer_and_values(self):
        layers = [X, 2 * X, -X]
        layer = self.run_layer_test(ScalarMix, dict(num_layers=3), layers, (2, 5, 6),
                                    expected_num_trainable_weights=2)
        # Starts as the plain average.
        assert np.allclose(np.asarray(layer(layers)), 2 * X / 3, atol=1e-6)
        layer.set_weights([np.array([0.0, np.log(2.0), 0.0], "float32"),
                           np.array(3.0, "float32")])
        expected = 3 * (X + 2 * 2 * X - X) / 4
        np.testing.assert_allclose(np.asarray(layer(layers)), expected, atol=1e-5)
