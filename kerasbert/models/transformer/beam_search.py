"""Greedy and beam search over an incremental decoder, in `keras.ops` only.

Every loop is an `ops.while_loop` over fixed-shape state (the sequences are
[..., max_length + 1] buffers written one column per step, the caches are
fixed-size), so the search traces inside a TensorFlow function with autograph
off (serving signatures) and under `jax.jit` alike.

The beam search is the one of tensor2tensor, which Model Garden's
`ops/beam_search.py` keeps (and the parity test checks token for token):
at each step the alive beams grow by every token, the best 2k candidates are
kept (so k of them can still be alive when some end), those ending in the
end id join the finished set scored by log-probability / length penalty
((5 + length) / 6) ** alpha (Wu et al., 2016), and the search stops when no
alive beam, even at the longest length, can beat the worst finished one.
"""

from keras import ops

#: Large but finite (as the peer's), so 0 * _INF stays 0.
_INF = 1.0e7


def length_penalty(length, alpha):
    """((5 + length) / 6) ** alpha, float32."""
    return ops.power((5.0 + ops.cast(length, "float32")) / 6.0, alpha)


def _gather_beams(tree, indices):
    """Picks beams: each [B, K, ...] leaf of `tree` indexed by int [B, K']
    along axis 1 -> [B, K', ...]."""
    def gather_leaf(x):
        # take_along_axis needs the index broadcast over the trailing axes.
        shape = ops.shape(x)
        index = ops.reshape(ops.cast(indices, "int32"),
                            tuple(ops.shape(indices)) + (1,) * (len(x.shape) - 2))
        index = ops.broadcast_to(index, (shape[0], ops.shape(indices)[1]) + tuple(shape[2:]))
        return ops.take_along_axis(x, index, axis=1)

    return _map(gather_leaf, tree)


def _map(fn, tree):
    if isinstance(tree, dict):
        return {k: _map(fn, v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(_map(fn, v) for v in tree)
    return fn(tree)


def _flatten_beams(x):
    shape = ops.shape(x)
    return ops.reshape(x, (shape[0] * shape[1],) + tuple(shape[2:]))


def _unflatten_beams(x, batch, beams):
    return ops.reshape(x, (batch, beams) + tuple(ops.shape(x)[1:]))


def _write_column(seq, index, values):
    """seq [..., L] with column `index` set to values [...]."""
    columns = ops.arange(ops.shape(seq)[-1], dtype="int32")
    return ops.where(columns == index, ops.expand_dims(values, -1), seq)


def greedy_search(step_fn, start_ids, cache, max_length, end_id):
    """Picks the most likely token at each step until every row has ended.

    Args:
        step_fn: (token_ids int32 [B], index int32 scalar, cache) ->
            (logits float [B, V], cache).
        start_ids: int32 [B].
        cache: nested tensors [B, ...] (fixed shapes).
        max_length: int, tokens to generate at most.
        end_id: int.

    Returns:
        int32 [B, max_length]: the tokens after the start, the end id
        included, 0 after it.
    """
    batch = ops.shape(start_ids)[0]
    seq = ops.zeros((batch, max_length + 1), "int32")
    seq = _write_column(seq, 0, ops.cast(start_ids, "int32"))
    done = ops.zeros((batch,), "bool")

    def cond(i, seq, done, cache):
        return ops.logical_and(i < max_length, ops.logical_not(ops.all(done)))

    def body(i, seq, done, cache):
        tokens = ops.take(seq, i, axis=1)
        logits, cache = step_fn(tokens, i, cache)
        chosen = ops.cast(ops.argmax(ops.cast(logits, "float32"), axis=-1), "int32")
        chosen = ops.where(done, 0, chosen)
        seq = _write_column(seq, i + 1, chosen)
        done = ops.logical_or(done, chosen == end_id)
        return i + 1, seq, done, cache

    _, seq, _, _ = ops.while_loop(cond, body, (ops.convert_to_tensor(0, "int32"), seq, done,
                                               cache))
    return seq[:, 1:]


def beam_search(step_fn, start_ids, cache, vocabulary_size, max_length, end_id, beam_size=4,
                alpha=0.6):
    """The tensor2tensor / Model Garden beam search (see the module's doc).

    Args:
        step_fn: (token_ids int32 [B * K], index int32 scalar, cache) ->
            (logits float [B * K, V], cache); row b * K + k is beam k of
            example b. Whatever the step reads but never changes (the
            encoder's output) belongs in its closure, repeated K times per
            example, not in `cache`.
        start_ids: int32 [B].
        cache: nested tensors [B, ...]: each example's state, copied to its
            K beams here.
        vocabulary_size: int, V.
        max_length: int, tokens to generate at most.
        end_id: int.
        beam_size: int, K.
        alpha: float, the length penalty's exponent.

    Returns:
        (int32 [B, max_length] the best beam's tokens after the start, the
        end id included, 0 after it; float32 [B] its score: log-probability /
        length penalty when it ended, its log-probability when no beam of
        the example ended).
    """
    k = int(beam_size)
    batch = ops.shape(start_ids)[0]
    seq = ops.zeros((batch, k, max_length + 1), "int32")
    seq = _write_column(seq, 0, ops.repeat(ops.expand_dims(ops.cast(start_ids, "int32"), 1),
                                           k, axis=1))
    # Only the first beam is alive at the start: the others would repeat it.
    first = ops.convert_to_tensor([0.0] + [-float("inf")] * (k - 1), "float32")
    alive_log_probs = ops.broadcast_to(ops.expand_dims(first, 0), (batch, k))
    alive_cache = _map(lambda x: ops.repeat(ops.expand_dims(x, 1), k, axis=1), cache)
    state = {
        "index": ops.convert_to_tensor(0, "int32"),
        "alive_seq": seq,
        "alive_log_probs": alive_log_probs,
        "alive_cache": alive_cache,
        "finished_seq": ops.zeros_like(seq),
        "finished_scores": ops.full((batch, k), -_INF, "float32"),
        "finished_flags": ops.zeros((batch, k), "bool"),
    }
    max_penalty = length_penalty(max_length, alpha)

    def cond(state):
        # Stop when, in every example, the worst finished score beats the
        # best any alive beam could reach (its log-probability only falls).
        best_alive = state["alive_log_probs"][:, 0] / max_penalty
        flags = ops.cast(state["finished_flags"], "float32")
        lowest_finished = ops.min(state["finished_scores"] * flags, axis=1)
        lowest_finished += (1.0 - ops.max(flags, axis=1)) * -_INF
        settled = ops.all(lowest_finished > best_alive)
        return ops.logical_and(state["index"] < max_length, ops.logical_not(settled))

    def body(state):
        i = state["index"]
        tokens = _flatten_beams(ops.take(state["alive_seq"], i, axis=2))
        logits, flat_cache = step_fn(tokens, i, _map(_flatten_beams, state["alive_cache"]))
        new_cache = _map(lambda x: _unflatten_beams(x, batch, k), flat_cache)
        logits = ops.reshape(ops.cast(logits, "float32"), (batch, k, vocabulary_size))
        log_probs = logits - ops.logsumexp(logits, axis=2, keepdims=True)
        log_probs = log_probs + ops.expand_dims(state["alive_log_probs"], 2)
        # The best 2k (beam, token) continuations.
        top_log_probs, top_indices = ops.top_k(
            ops.reshape(log_probs, (batch, k * vocabulary_size)), 2 * k)
        top_beams = top_indices // vocabulary_size
        top_ids = ops.cast(top_indices % vocabulary_size, "int32")
        top_seq, top_cache = _gather_beams([state["alive_seq"], new_cache], top_beams)
        top_seq = _write_column(top_seq, i + 1, top_ids)
        ended = top_ids == end_id

        # Alive: the best k that did not end.
        alive_scores = top_log_probs + ops.cast(ended, "float32") * -_INF
        _, alive_indices = ops.top_k(alive_scores, k)
        alive_seq, alive_log_probs, alive_cache = _gather_beams(
            [top_seq, alive_scores, top_cache], alive_indices)

        # Finished: the best k of the old finished and the new ended ones.
        scores = top_log_probs / length_penalty(i + 1, alpha)
        scores += (1.0 - ops.cast(ended, "float32")) * -_INF
        all_seq = ops.concatenate([state["finished_seq"], top_seq], axis=1)
        all_scores = ops.concatenate([state["finished_scores"], scores], axis=1)
        all_flags = ops.concatenate([state["finished_flags"], ended], axis=1)
        _, finished_indices = ops.top_k(all_scores, k)
        finished_seq, finished_scores, finished_flags = _gather_beams(
            [all_seq, all_scores, all_flags], finished_indices)
        return ({
            "index": i + 1,
            "alive_seq": alive_seq,
            "alive_log_probs": alive_log_probs,
            "alive_cache": alive_cache,
            "finished_seq": finished_seq,
            "finished_scores": finished_scores,
            "finished_flags": finished_flags,
        },)

    (state,) = ops.while_loop(cond, body, (state,))
    # An example with no finished beam returns its best alive one.
    any_finished = ops.any(state["finished_flags"], axis=1)
    best = ops.where(ops.expand_dims(any_finished, 1), state["finished_seq"][:, 0],
                     state["alive_seq"][:, 0])
    score = ops.where(any_finished, state["finished_scores"][:, 0],
                      state["alive_log_probs"][:, 0])
    return best[:, 1:], score
