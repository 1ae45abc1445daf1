"""`greedy_search` on a toy model whose next-token logits depend only on
the previous token (a transition table), so every expected output can be
read off the table by hand."""

import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from kerasbert.decoding import greedy_search
from kerasbert.decoding import sampler

END = 3
# From each token, the most likely next one: 0 -> 1 -> 2 -> 3 (end) and
# 4 -> 4 forever.
TABLE = np.full((5, 5), -5.0, "float32")
for prev, nxt in ((0, 1), (1, 2), (2, END), (3, 0), (4, 4)):
    TABLE[prev, nxt] = 5.0


def chain_step(tokens, index, cache):
    """Logits of TABLE's row for each previous token; the cache counts the
    steps each row has seen (and checks that `index` follows them)."""
    del index
    return ops.take(ops.convert_to_tensor(TABLE), tokens, axis=0), cache + 1


def test_rows_stop_at_the_end_token_and_read_their_previous_token():
    tokens, counts = greedy_search(chain_step, np.array([0, 1, 4], "int32"),
                                   np.zeros(3, "int32"), max_length=5, end_id=END)
    assert np.asarray(tokens).tolist() == [[1, 2, 3, 0, 0], [2, 3, 0, 0, 0], [4, 4, 4, 4, 4]]
    # Tokens before the end id, which is not counted.
    assert np.asarray(counts).tolist() == [2, 1, 5]


def test_the_loop_stops_when_every_row_has_ended():
    seen = []

    def counting_step(tokens, index, cache):
        seen.append(int(index))
        return chain_step(tokens, index, cache)

    tokens, _ = greedy_search(counting_step, np.array([1, 2], "int32"), np.zeros(2, "int32"),
                              max_length=6, end_id=END)
    assert seen == [0, 1] and np.asarray(tokens)[:, 2:].max() == 0


def test_no_end_token_and_per_row_limits():
    tokens, counts = greedy_search(chain_step, np.array([0, 4], "int32"), np.zeros(2, "int32"),
                                   max_length=4, end_id=None, limits=np.array([4, 2], "int32"))
    # Without an end id, token 3 is an ordinary token; row 1 stops after 2.
    assert np.asarray(tokens).tolist() == [[1, 2, 3, 0], [4, 4, 0, 0]]
    assert np.asarray(counts).tolist() == [4, 2]


def test_a_graph_with_a_tensor_max_length_equals_eager():
    start = np.array([0, 1, 4], "int32")

    @tf.function(autograph=False)
    def graph(start, max_length):
        return greedy_search(chain_step, start, tf.zeros([3], tf.int32), max_length, END)

    eager, eager_counts = greedy_search(chain_step, start, np.zeros(3, "int32"), 4, END)
    tokens, counts = graph(tf.constant(start), tf.constant(4))
    assert tokens.numpy().tolist() == np.asarray(eager).tolist()
    assert counts.numpy().tolist() == np.asarray(eager_counts).tolist()
    empty, none = graph(tf.constant(start), tf.constant(0))
    assert empty.shape == (3, 0) and none.numpy().tolist() == [0, 0, 0]


def test_a_sampling_pick_is_reproducible_and_keeps_to_the_nucleus():
    start = np.zeros(64, "int32")

    def run(seed):
        pick = sampler("top_p", 4, 64, top_p=0.5, temperature=2.0, seed=seed)
        return np.asarray(greedy_search(chain_step, start, np.zeros(64, "int32"), 4, None,
                                        pick=pick)[0])

    first = run(7)
    assert (first == run(7)).all()
    # At temperature 2 the chain's token has 0.97 of each row's mass, so
    # top_p 0.5 keeps it alone: the chain, whatever the draw.
    assert (first == [1, 2, 3, 0]).all()
    flat = sampler("top_k", 4, 64, top_k=5, temperature=100.0, seed=7)
    drawn = np.asarray(greedy_search(chain_step, start, np.zeros(64, "int32"), 4, None,
                                     pick=flat)[0])
    assert len(set(drawn[:, 0].tolist())) > 2  # nearly uniform: many tokens drawn
    assert sampler("greedy", 4, 64) is None
    with pytest.raises(ValueError, match="top_k"):
        sampler("top_k", 4, 64, top_k=0)
