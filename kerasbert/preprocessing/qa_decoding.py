"""Span decoding for extractive QA (SQuAD v1.1 / v2.0), pure NumPy.

The `QuestionAnswerer` gives start/end logits per token of each window
(`[CLS] question [SEP] context-window [SEP]`). A long context is split into
several windows (doc_stride), so one example has one or more windows. This
module turns the logits into answer text, as google-research/bert's
`run_squad.py` does:

- candidate spans (start, end) have both tokens inside the context part of
  the window (character offsets >= 0), start <= end, and
  end - start + 1 <= `max_answer_length`; optionally the start token must be
  in its max-context window (`token_is_max_context`);
- a span scores start_logit[start] + end_logit[end]; all windows of an
  example compete, and the `n_best_size` best distinct spans are kept;
- SQuAD v2.0: the null (no-answer) score of a window is
  start_logit[0] + end_logit[0] ([CLS]); the example's null score is the
  minimum over its windows. The prediction is "" when
  `null_score - best_span_score > null_score_diff_threshold` (default 0.0);
  `score_diff` is returned so the threshold can be tuned on dev data
  (the official evaluation's best-threshold search);
- the answer text is `context[start_char:end_char]`, the original context
  characters between the start token's first and the end token's last
  character.

Character offsets: an int array [T, 2] per window of (start_char, end_char),
end exclusive, into the example's original context string; -1 (both) for
tokens that are not context ([CLS], question, [SEP], padding).
"""

import dataclasses

import numpy as np

DEFAULT_MAX_ANSWER_LENGTH = 30
DEFAULT_N_BEST_SIZE = 20


@dataclasses.dataclass
class SpanPrediction:
    """The decoded answer of one example.

    Attributes:
        text: the answer ("" for no answer).
        start_char, end_char: its character span in the context (end
            exclusive); -1, -1 for no answer.
        score: start + end logit of the best span (-inf if no window had a
            valid span).
        null_score: start + end logit at [CLS], the minimum over windows.
        score_diff: null_score - score (threshold on it for SQuAD v2.0).
        window: index (into the example's windows) of the best span's
            window, -1 if none.
        nbest: the best distinct spans, best first, each a dict with text,
            start_char, end_char, score, probability (softmax over the
            n-best scores), window, start_token, end_token.

    Example:

    >>> import numpy as np
    >>> from kerasbert.preprocessing import decode_answer
    >>> context = "the movie was good"
    >>> offsets = np.array([[-1, -1]] * 5 + [[0, 3], [4, 9], [10, 13], [14, 18], [-1, -1]])
    >>> start_logits = np.zeros(10); start_logits[8] = 5.0   # [T] of one window
    >>> end_logits = start_logits.copy()
    >>> prediction = decode_answer(context, [(start_logits, end_logits, offsets)],
    ...                            version_2_with_negative=False)
    >>> prediction.text, prediction.start_char, prediction.end_char, prediction.score
    ('good', 14, 18, 10.0)
    """

    text: str
    start_char: int
    end_char: int
    score: float
    null_score: float
    score_diff: float
    window: int = -1
    nbest: list = dataclasses.field(default_factory=list)

    @property
    def is_null(self):
        return self.start_char < 0


def _check_offsets(offsets, length):
    offsets = np.asarray(offsets)
    if offsets.ndim != 2 or offsets.shape[-1] != 2 or offsets.shape[0] != length:
        raise ValueError(
            f"offsets must be [T, 2] (start_char, end_char) with T={length} "
            f"like the logits; got shape {offsets.shape}."
        )
    return offsets.astype(np.int64)


def window_spans(
    start_logits,
    end_logits,
    offsets,
    *,
    max_answer_length=DEFAULT_MAX_ANSWER_LENGTH,
    n_best_size=DEFAULT_N_BEST_SIZE,
    token_is_max_context=None,
):
    """The best candidate spans of one window.

    Searches every (start, end) pair (not only the top-k starts and ends),
    in O(T * max_answer_length).

    Args:
        start_logits, end_logits: float [T].
        offsets: int [T, 2] character offsets, -1 for non-context tokens.
        max_answer_length: int >= 1, in tokens.
        n_best_size: int >= 1, how many spans to return.
        token_is_max_context: optional bool [T]; spans must start on a
            token whose max-context window is this one.

    Returns:
        list of (score, start_token, end_token), best first (at most
        n_best_size; empty if the window has no context token).
    """
    start_logits = np.asarray(start_logits, np.float64).reshape(-1)
    end_logits = np.asarray(end_logits, np.float64).reshape(-1)
    length = start_logits.shape[0]
    if end_logits.shape[0] != length:
        raise ValueError(
            f"start_logits ({length}) and end_logits ({end_logits.shape[0]}) "
            "differ in length."
        )
    if int(max_answer_length) < 1:
        raise ValueError(f"max_answer_length must be >= 1, got {max_answer_length}.")
    offsets = _check_offsets(offsets, length)
    in_context = (offsets[:, 0] >= 0) & (offsets[:, 1] >= 0)
    can_start = in_context.copy()
    if token_is_max_context is not None:
        can_start &= np.asarray(token_is_max_context, bool).reshape(-1)
    span = min(int(max_answer_length), length)
    # scores[i, k]: span from token i to token i + k.
    scores = np.full((length, span), -np.inf)
    for k in range(span):
        valid = can_start[: length - k] & in_context[k:]
        scores[: length - k, k] = np.where(
            valid, start_logits[: length - k] + end_logits[k:], -np.inf
        )
    flat = scores.reshape(-1)
    finite = np.flatnonzero(np.isfinite(flat))
    if finite.size == 0:
        return []
    top = min(int(n_best_size), finite.size)
    best = finite[np.argpartition(-flat[finite], top - 1)[:top]]
    best = best[np.argsort(-flat[best], kind="stable")]
    return [(float(flat[b]), int(b // span), int(b // span + b % span)) for b in best]


def _window_parts(window):
    if isinstance(window, dict):
        return (
            window["start_logits"],
            window["end_logits"],
            window["offsets"],
            window.get("token_is_max_context"),
        )
    parts = tuple(window)
    if len(parts) == 3:
        return parts + (None,)
    return parts


def decode_answer(
    context,
    windows,
    *,
    max_answer_length=DEFAULT_MAX_ANSWER_LENGTH,
    n_best_size=DEFAULT_N_BEST_SIZE,
    null_score_diff_threshold=0.0,
    version_2_with_negative=True,
):
    """Decodes one example from all of its windows.

    Args:
        context: str, the example's original context.
        windows: sequence of windows, each a dict with `start_logits` [T],
            `end_logits` [T], `offsets` [T, 2] and optionally
            `token_is_max_context` [T], or a tuple in that order.
        max_answer_length: int, longest answer in tokens (30).
        n_best_size: int, spans kept in `nbest` (20).
        null_score_diff_threshold: float; predict "" when
            null_score - best score exceeds it (SQuAD v2.0 only).
        version_2_with_negative: False (SQuAD v1.1) always answers with the
            best span (the null score is still reported).

    Returns:
        a `SpanPrediction`.
    """
    candidates = {}
    null_score = np.inf
    for w, window in enumerate(windows):
        start_logits, end_logits, offsets, max_context = _window_parts(window)
        start_logits = np.asarray(start_logits, np.float64).reshape(-1)
        end_logits = np.asarray(end_logits, np.float64).reshape(-1)
        null_score = min(null_score, float(start_logits[0] + end_logits[0]))
        offsets = _check_offsets(offsets, start_logits.shape[0])
        spans = window_spans(
            start_logits,
            end_logits,
            offsets,
            max_answer_length=max_answer_length,
            n_best_size=n_best_size,
            token_is_max_context=max_context,
        )
        for score, start, end in spans:
            start_char, end_char = int(offsets[start, 0]), int(offsets[end, 1])
            if end_char < start_char:
                continue
            key = (start_char, end_char)  # the same text seen by two windows
            if key not in candidates or candidates[key]["score"] < score:
                candidates[key] = {
                    "text": context[start_char:end_char],
                    "start_char": start_char,
                    "end_char": end_char,
                    "score": score,
                    "window": w,
                    "start_token": start,
                    "end_token": end,
                }
    if null_score == np.inf:  # no windows
        null_score = float("nan")
    nbest = sorted(candidates.values(), key=lambda c: -c["score"])[: int(n_best_size)]
    if nbest:
        scores = np.array([c["score"] for c in nbest])
        probs = np.exp(scores - scores.max())
        probs /= probs.sum()
        for c, p in zip(nbest, probs):
            c["probability"] = float(p)
    if not nbest:
        return SpanPrediction("", -1, -1, float("-inf"), null_score, float("inf"),
                              -1, [])
    best = nbest[0]
    score_diff = null_score - best["score"]
    if version_2_with_negative and score_diff > null_score_diff_threshold:
        return SpanPrediction("", -1, -1, best["score"], null_score, score_diff,
                              best["window"], nbest)
    return SpanPrediction(
        best["text"], best["start_char"], best["end_char"], best["score"],
        null_score, score_diff, best["window"], nbest,
    )


def decode_answers(
    contexts,
    start_logits,
    end_logits,
    offsets,
    example_index,
    *,
    token_is_max_context=None,
    **kwargs,
):
    """Decodes a batch of windows into one prediction per example.

    Args:
        contexts: sequence of str, the examples' contexts (index = example).
        start_logits, end_logits: float [N, T] for N windows (the model's
            outputs over a dataset, concatenated).
        offsets: int [N, T, 2] character offsets, -1 for non-context.
        example_index: int [N], the example (index into `contexts`) each
            window belongs to.
        token_is_max_context: optional bool [N, T].
        **kwargs: `decode_answer` options (max_answer_length, n_best_size,
            null_score_diff_threshold, version_2_with_negative).

    Returns:
        a list of `SpanPrediction`, one per context (examples with no window
        get the no-answer prediction with NaN null score).
    """
    start_logits = np.asarray(start_logits)
    end_logits = np.asarray(end_logits)
    offsets = np.asarray(offsets)
    example_index = np.asarray(example_index).reshape(-1)
    n = start_logits.shape[0]
    for name, array in (("end_logits", end_logits), ("offsets", offsets)):
        if array.shape[0] != n:
            raise ValueError(f"{name} has {array.shape[0]} windows, start_logits {n}.")
    if example_index.shape[0] != n:
        raise ValueError(f"example_index has {example_index.shape[0]} entries for {n} windows.")
    if n and (example_index.min() < 0 or example_index.max() >= len(contexts)):
        raise ValueError(
            f"example_index values must be in [0, {len(contexts)}); got "
            f"[{example_index.min()}, {example_index.max()}]."
        )
    by_example = [[] for _ in contexts]
    for i in range(n):
        by_example[int(example_index[i])].append(
            (
                start_logits[i],
                end_logits[i],
                offsets[i],
                None if token_is_max_context is None else token_is_max_context[i],
            )
        )
    predictions = []
    for context, windows in zip(contexts, by_example):
        if not windows:
            predictions.append(
                SpanPrediction("", -1, -1, float("-inf"), float("nan"), float("nan"))
            )
            continue
        predictions.append(decode_answer(context, windows, **kwargs))
    return predictions
