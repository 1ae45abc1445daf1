"""`beam_search` against exhaustive search: with as many beams as there
are sequences, tensor2tensor's beam search keeps every candidate, so its
answer must be the best of all sequences that end within the length, by
log-probability / ((5 + length) / 6) ** alpha. Model Garden's own beam
search is matched token for token in tests/convert/test_tf_models_seq2seq.py."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from kerasbert.decoding import beam_search
from kerasbert.decoding import greedy_search
from kerasbert.decoding import length_penalty

V, END, MAX_LENGTH = 4, 3, 3


def table_step(table):
    """A model whose next-token logits depend on the previous token and the
    step: table [L, V, V]. The cache [B * K] counts each beam's steps."""
    table = ops.convert_to_tensor(table)

    def step(tokens, index, cache):
        return ops.take(ops.take(table, index, axis=0), tokens, axis=0), cache + 1

    return step


def log_softmax(x):
    return x - np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)) - x.max(
        -1, keepdims=True)


def exhaustive_best(table, start, alpha):
    """(tokens, score) of the best sequence ending in END within MAX_LENGTH."""
    log_probs = log_softmax(table.astype("float64"))
    best = (None, -np.inf)
    for length in range(1, MAX_LENGTH + 1):
        for body in itertools.product([t for t in range(V) if t != END], repeat=length - 1):
            tokens, previous, total = list(body) + [END], start, 0.0
            for i, token in enumerate(tokens):
                total += log_probs[i, previous, token]
                previous = token
            score = total / ((5.0 + length) / 6.0) ** alpha
            if score > best[1]:
                best = (tokens + [0] * (MAX_LENGTH - length), score)
    return best


@pytest.mark.parametrize("seed", range(4))
def test_enough_beams_find_the_exhaustive_best(seed):
    rng = np.random.default_rng(seed)
    table = rng.normal(0.0, 2.0, (MAX_LENGTH, V, V)).astype("float32")
    starts = np.array([0, 1, 2], "int32")
    tokens, scores = beam_search(table_step(table), starts, np.zeros(3, "int32"), V,
                                 MAX_LENGTH, END, beam_size=27, alpha=0.6)
    for row, start in enumerate(starts):
        expected, score = exhaustive_best(table, start, 0.6)
        assert np.asarray(tokens)[row].tolist() == expected
        assert float(np.asarray(scores)[row]) == pytest.approx(score, rel=1e-5)


def test_beam_search_beats_greedy_where_the_first_step_misleads():
    # Step 0: token 1 looks best (0.6) but leads nowhere likely; token 2
    # (0.4) is followed by the end token for sure.
    table = np.full((MAX_LENGTH, V, V), -30.0, "float32")
    table[0, 0, 1], table[0, 0, 2] = np.log(0.6), np.log(0.4)
    table[1, 1, :] = 0.0  # after 1: four equally likely tokens
    table[1, 2, END] = 0.0
    table[2, :, END] = 0.0
    step, start, cache = table_step(table), np.zeros(1, "int32"), np.zeros(1, "int32")
    greedy, _ = greedy_search(step, start, cache, MAX_LENGTH, END)
    beam, _ = beam_search(step, start, cache, V, MAX_LENGTH, END, beam_size=2)
    assert np.asarray(greedy)[0, 0] == 1
    assert np.asarray(beam).tolist() == [[2, END, 0]]


def test_a_graph_without_autograph_equals_eager_and_bad_beams_are_refused():
    table = np.random.default_rng(5).normal(0.0, 2.0, (MAX_LENGTH, V, V)).astype("float32")
    starts = np.array([0, 2], "int32")

    def search(starts, cache):
        return beam_search(table_step(table), starts, cache, V, MAX_LENGTH, END, beam_size=3)

    eager = search(starts, np.zeros(2, "int32"))
    graph = tf.function(search, autograph=False)(tf.constant(starts), tf.zeros([2], tf.int32))
    assert graph[0].numpy().tolist() == np.asarray(eager[0]).tolist()
    np.testing.assert_allclose(graph[1].numpy(), np.asarray(eager[1]), rtol=1e-6)
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(table_step(table), starts, np.zeros(2, "int32"), V, MAX_LENGTH, END,
                    beam_size=0)


def test_length_penalty_is_wu_et_als():
    assert float(length_penalty(5, 0.6)) == pytest.approx((10.0 / 6.0) ** 0.6)
    assert float(length_penalty(1, 0.0)) == 1.0
