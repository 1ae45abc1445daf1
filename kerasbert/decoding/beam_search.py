"""Beam search over an incremental model: tensor2tensor's, which Model
Garden's `ops/beam_search.py` keeps (the parity test in
tests/convert/test_tf_models_seq2seq.py checks it token for token).

At each step the alive beams grow by every token and the best 2k
candidates are kept (so k of them can still be alive when some end); those
ending in the end id join the finished set, scored by log-probability /
length penalty ((5 + length) / 6) ** alpha (Wu et al., 2016); the search
stops when no alive beam, even at the longest length, can beat the worst
finished one. The state is a dict of fixed-shape tensors ([B, K, L + 1]
sequence buffers written one column per step), so the loop is one
`ops.while_loop` that traces in a SavedModel's function and under JAX.
"""

import keras
from keras import ops

from kerasbert.decoding.state import flatten_beams
from kerasbert.decoding.state import gather_beams
from kerasbert.decoding.state import repeat_beams
from kerasbert.decoding.state import unflatten_beams
from kerasbert.decoding.state import write_column

#: Large but finite (as the peer's), so 0 * _INF stays 0.
_INF = 1.0e7


def length_penalty(length, alpha):
    """((5 + length) / 6) ** alpha, float32."""
    return ops.power((5.0 + ops.cast(length, "float32")) / 6.0, alpha)


def _initial_state(start_ids, cache, beams, max_length):
    """The search state before the first step; only beam 0 of each example
    is alive (the others would repeat it)."""
    batch = ops.shape(start_ids)[0]
    seq = ops.zeros((batch, beams, max_length + 1), "int32")
    seq = write_column(seq, 0, repeat_beams(ops.cast(start_ids, "int32"), beams))
    first = ops.convert_to_tensor([0.0] + [-float("inf")] * (beams - 1), "float32")
    return {
        "index": ops.convert_to_tensor(0, "int32"),
        "alive_seq": seq,
        "alive_log_probs": ops.broadcast_to(ops.expand_dims(first, 0), (batch, beams)),
        "alive_cache": keras.tree.map_structure(lambda x: repeat_beams(x, beams), cache),
        "finished_seq": ops.zeros_like(seq),
        "finished_scores": ops.full((batch, beams), -_INF, "float32"),
        "finished_flags": ops.zeros((batch, beams), "bool"),
    }


def _unsettled(state, max_penalty):
    """Whether some example's best alive beam could still beat (at the
    longest length: its log-probability only falls) its worst finished
    one."""
    best_alive = state["alive_log_probs"][:, 0] / max_penalty
    flags = ops.cast(state["finished_flags"], "float32")
    lowest_finished = ops.min(state["finished_scores"] * flags, axis=1)
    lowest_finished += (1.0 - ops.max(flags, axis=1)) * -_INF
    return ops.logical_not(ops.all(lowest_finished > best_alive))


def _grow(state, step_fn, vocabulary_size, beams):
    """The best 2k (beam, token) continuations of the alive beams:
    (seq [B, 2k, L + 1], log_probs [B, 2k], cache [B, 2k, ...], ids
    [B, 2k])."""
    i = state["index"]
    batch = ops.shape(state["alive_log_probs"])[0]
    tokens = flatten_beams(ops.take(state["alive_seq"], i, axis=2))
    logits, cache = step_fn(tokens, i, keras.tree.map_structure(flatten_beams,
                                                                state["alive_cache"]))
    cache = keras.tree.map_structure(lambda x: unflatten_beams(x, batch, beams), cache)
    logits = ops.reshape(ops.cast(logits, "float32"), (batch, beams, vocabulary_size))
    log_probs = logits - ops.logsumexp(logits, axis=2, keepdims=True)
    log_probs = log_probs + ops.expand_dims(state["alive_log_probs"], 2)
    top_log_probs, top_indices = ops.top_k(
        ops.reshape(log_probs, (batch, beams * vocabulary_size)), 2 * beams)
    top_ids = ops.cast(top_indices % vocabulary_size, "int32")
    top_seq, top_cache = gather_beams([state["alive_seq"], cache],
                                      top_indices // vocabulary_size)
    return write_column(top_seq, i + 1, top_ids), top_log_probs, top_cache, top_ids


def _keep_alive(top_seq, top_log_probs, top_cache, ended, beams):
    """The best k candidates that did not end: seq, log_probs, cache."""
    alive_scores = top_log_probs + ops.cast(ended, "float32") * -_INF
    _, alive_indices = ops.top_k(alive_scores, beams)
    return gather_beams([top_seq, alive_scores, top_cache], alive_indices)


def _keep_finished(state, top_seq, top_log_probs, ended, alpha, beams):
    """The best k of the finished beams and the candidates that just ended,
    scored with the length penalty: seq, scores, flags."""
    scores = top_log_probs / length_penalty(state["index"] + 1, alpha)
    scores += (1.0 - ops.cast(ended, "float32")) * -_INF
    all_seq = ops.concatenate([state["finished_seq"], top_seq], axis=1)
    all_scores = ops.concatenate([state["finished_scores"], scores], axis=1)
    all_flags = ops.concatenate([state["finished_flags"], ended], axis=1)
    _, finished_indices = ops.top_k(all_scores, beams)
    return gather_beams([all_seq, all_scores, all_flags], finished_indices)


def _best(state):
    """The best finished beam of each example (its best alive one when none
    finished): (tokens after the start [B, L], score [B])."""
    any_finished = ops.any(state["finished_flags"], axis=1)
    best = ops.where(ops.expand_dims(any_finished, 1), state["finished_seq"][:, 0],
                     state["alive_seq"][:, 0])
    score = ops.where(any_finished, state["finished_scores"][:, 0],
                      state["alive_log_probs"][:, 0])
    return best[:, 1:], score


def beam_search(step_fn, start_ids, cache, vocabulary_size, max_length, end_id, beam_size=4,
                alpha=0.6):
    """The tensor2tensor / Model Garden beam search (see the module's doc).

    Args:
        step_fn: (token_ids int32 [B * K], index int32 scalar, cache) ->
            (logits float [B * K, V], cache); row b * K + k is beam k of
            example b. Whatever the step reads but never changes (the
            encoder's output) belongs in its closure, repeated K times per
            example, not in `cache`.
        start_ids: int [B].
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
    beams = int(beam_size)
    if beams < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size!r}.")
    max_penalty = length_penalty(max_length, alpha)

    def cond(state):
        return ops.logical_and(state["index"] < max_length, _unsettled(state, max_penalty))

    def body(state):
        top_seq, top_log_probs, top_cache, top_ids = _grow(state, step_fn, vocabulary_size,
                                                        beams)
        ended = top_ids == end_id
        alive = _keep_alive(top_seq, top_log_probs, top_cache, ended, beams)
        finished = _keep_finished(state, top_seq, top_log_probs, ended, alpha, beams)
        names = ("alive_seq", "alive_log_probs", "alive_cache",
                 "finished_seq", "finished_scores", "finished_flags")
        return (dict(zip(names, alive + finished), index=state["index"] + 1),)

    (state,) = ops.while_loop(cond, body, (_initial_state(start_ids, cache, beams, max_length),))
    return _best(state)
