"""Choosing a token from next-token logits: greedy, top-k and top-p
(nucleus) sampling with a temperature.

A sample is drawn by inverting the cumulative distribution with one uniform
number per row, so a whole generation's randomness is one [steps, B] draw
made before the decoding loop (`sampler`): the loop itself stays stateless,
which `ops.while_loop` needs under JAX and inside a SavedModel's function.
"""

import keras
from keras import ops

#: What `CausalLM.generate` may do at each step.
SAMPLING_STRATEGIES = ("greedy", "top_k", "top_p")
#: What `Seq2SeqLM.generate` and the text2text export may do.
SEARCH_STRATEGIES = ("beam", "greedy")
# Logits of excluded tokens in top-k / top-p sampling: finite, so a row can
# never become all -inf (NaN probabilities), and exp() of it is exactly 0.
_EXCLUDED = -1e9


def check_sampling(strategy, top_k, top_p, temperature):
    """Raises ValueError naming a bad sampling option."""
    if strategy not in SAMPLING_STRATEGIES:
        raise ValueError(f"strategy must be one of {SAMPLING_STRATEGIES}, got {strategy!r}.")
    if not (isinstance(top_k, int) and top_k >= 1):
        raise ValueError(f"top_k must be an integer >= 1, got {top_k!r}.")
    if not 0.0 < float(top_p) <= 1.0:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}.")
    if not float(temperature) > 0.0:
        raise ValueError(f"temperature must be > 0, got {temperature!r}.")


def pick_token(logits, uniform, strategy="greedy", top_k=50, top_p=0.9, temperature=1.0):
    """One token per row, chosen by `strategy` (see `sample_logits`).

    Args:
        logits: float [B, V].
        uniform: float [B] in [0, 1), the row's random number (not read by
            "greedy").

    Returns:
        int32 [B].
    """
    logits = ops.cast(logits, "float32")
    if strategy == "greedy":
        return ops.cast(ops.argmax(logits, axis=-1), "int32")
    logits = logits / temperature
    vocabulary_size = ops.shape(logits)[-1]
    k = min(int(top_k), vocabulary_size) if strategy == "top_k" else vocabulary_size
    values, indices = ops.top_k(logits, k=k)  # sorted, most likely first
    probs = ops.softmax(values, axis=-1)
    if strategy == "top_p":
        # Probability mass strictly before each token: keep while < top_p.
        before = ops.cumsum(probs, axis=-1) - probs
        probs = ops.softmax(ops.where(before < top_p, values, _EXCLUDED), axis=-1)
    cumulative = ops.cumsum(probs, axis=-1)
    # Scaled by the total (1 up to rounding), the draw stays below the last
    # kept token's cumulative mass, so an excluded token (mass 0) is never
    # reached: the count of tokens passed is the choice.
    threshold = ops.expand_dims(ops.cast(uniform, "float32"), 1) * cumulative[:, -1:]
    choice = ops.sum(ops.cast(cumulative <= threshold, "int32"), axis=1, keepdims=True)
    choice = ops.minimum(choice, k - 1)
    return ops.cast(ops.take_along_axis(indices, choice, axis=1)[:, 0], "int32")


def sample_logits(logits, strategy="greedy", top_k=50, top_p=0.9, temperature=1.0,
                  seed=None):
    """Picks one token per row.

    Args:
        logits: float [B, V].
        strategy: "greedy" (argmax; temperature does not matter), "top_k"
            (sample among the k most likely tokens) or "top_p" (nucleus:
            sample among the smallest set of most likely tokens whose
            probability reaches top_p; the most likely token always stays).
        top_k: int >= 1, for "top_k".
        top_p: float in (0, 1], for "top_p".
        temperature: float > 0; logits are divided by it before sampling
            (< 1 sharpens, > 1 flattens).
        seed: a `keras.random.SeedGenerator`, an int, or None.

    Returns:
        int32 [B].
    """
    uniform = None
    if strategy != "greedy":
        uniform = keras.random.uniform(ops.shape(logits)[:1], seed=seed)
    return pick_token(logits, uniform, strategy, top_k, top_p, temperature)


def sampler(strategy, steps, batch, top_k=50, top_p=0.9, temperature=1.0, seed=None):
    """A `pick` for `greedy_search` that samples, or None for greedy.

    Args:
        strategy, top_k, top_p, temperature: see `sample_logits`.
        steps: int, the most tokens a row will choose.
        batch: int, B.
        seed: int or None; the same seed gives the same samples.

    Returns:
        (logits float32 [B, V], index int32 scalar) -> int32 [B], reading
        row `index` of a [steps, B] uniform draw made here; None for
        "greedy" (`greedy_search`'s own argmax).
    """
    check_sampling(strategy, top_k, top_p, temperature)
    if strategy == "greedy":
        return None
    uniform = keras.random.uniform((int(steps), int(batch)),
                                   seed=keras.random.SeedGenerator(seed))

    def pick(logits, index):
        return pick_token(logits, ops.take(uniform, index, axis=0), strategy, top_k, top_p,
                          temperature)

    return pick
