"""Choosing a token from logits: greedy, top-k, top-p and temperature, by
their distributions over many seeded draws."""

import keras
import numpy as np

from kerasbert.decoding import sample_logits


class TestSampling:
    LOGITS = np.log(np.array([[0.5, 0.3, 0.15, 0.05], [0.05, 0.15, 0.3, 0.5]], "float32"))

    def draw(self, n=400, **options):
        """[n, 2]: n independent draws from each row of LOGITS (one call on
        the rows repeated n times: every row gets its own random number)."""
        seed = keras.random.SeedGenerator(3)
        draws = sample_logits(np.tile(self.LOGITS, (n, 1)), seed=seed, **options)
        return np.asarray(draws).reshape(n, 2)

    def test_greedy_and_degenerate_settings_are_argmax(self):
        assert sample_logits(self.LOGITS).numpy().tolist() == [0, 3]
        assert set(self.draw(20, strategy="top_k", top_k=1).reshape(-1)) <= {0, 3}
        assert (self.draw(20, strategy="top_p", top_p=0.01) == [0, 3]).all()

    def test_top_k_samples_only_the_k_most_likely(self):
        draws = self.draw(strategy="top_k", top_k=2)
        assert set(draws[:, 0]) == {0, 1} and set(draws[:, 1]) == {2, 3}
        # Renormalised over the two: 0.5 / 0.8 = 0.625 (sd 0.024 over 400
        # draws; a uniform pick of the two, 0.5, is outside the bound).
        assert abs((draws[:, 0] == 0).mean() - 0.625) < 0.1

    def test_top_p_keeps_the_nucleus(self):
        # 0.5 + 0.3 >= 0.7: tokens 0 and 1 (row 0), 3 and 2 (row 1).
        draws = self.draw(strategy="top_p", top_p=0.7)
        assert set(draws[:, 0]) == {0, 1} and set(draws[:, 1]) == {2, 3}

    def test_temperature_flattens_and_sharpens(self):
        hot = self.draw(strategy="top_k", top_k=4, temperature=5.0)
        cold = self.draw(strategy="top_k", top_k=4, temperature=0.2)
        # Token 0's share: 0.30 at temperature 5, 0.925 at 0.2 (0.5 at 1); the
        # bounds are over 5 standard deviations (400 draws) from both.
        assert (hot[:, 0] == 0).mean() < 0.45 and (cold[:, 0] == 0).mean() > 0.85
