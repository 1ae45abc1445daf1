"""QA span decoding on hand-worked logits: context-only spans, start <= end,
max_answer_length, best span across windows, SQuAD v2 null threshold,
n-best de-duplication, answer text from character offsets."""

import numpy as np
import pytest

from kerasbert.preprocessing.qa_decoding import decode_answer
from kerasbert.preprocessing.qa_decoding import decode_answers
from kerasbert.preprocessing.qa_decoding import window_spans

CONTEXT = "the quick brown fox jumps"
# Window: [CLS] q [SEP] the quick brown fox jumps [SEP] [PAD]
WORDS = [(0, 3), (4, 9), (10, 15), (16, 19), (20, 25)]
OFFSETS = np.array([(-1, -1)] * 3 + WORDS + [(-1, -1)] * 2)
T = len(OFFSETS)


def logits(high, low=-5.0):
    out = np.full(T, low)
    for position, value in high.items():
        out[position] = value
    return out


def brute_force(start, end, offsets, max_len, n):
    ctx = offsets[:, 0] >= 0
    spans = [(start[i] + end[j], i, j) for i in range(T) for j in range(T)
             if ctx[i] and ctx[j] and i <= j < i + max_len]
    return sorted(spans, key=lambda s: -s[0])[:n]


def test_window_spans_matches_brute_force():
    rng = np.random.RandomState(0)
    for max_len in (1, 2, 30):
        start, end = rng.randn(T), rng.randn(T)
        got = window_spans(start, end, OFFSETS, max_answer_length=max_len, n_best_size=6)
        want = brute_force(start, end, OFFSETS, max_len, 6)
        assert [(i, j) for _, i, j in got] == [(i, j) for _, i, j in want]
        np.testing.assert_allclose([s for s, _, _ in got], [s for s, _, _ in want])


def test_only_context_spans_with_start_before_end():
    # The best raw logits sit on [CLS], the question and padding; and the
    # best end comes before the best start.
    start = logits({0: 9, 1: 9, 9: 9, 6: 3, 4: 2})
    end = logits({0: 9, 2: 9, 9: 9, 5: 3})
    pred = decode_answer(CONTEXT, [(start, end, OFFSETS)], version_2_with_negative=False)
    # start 6 (fox) > end 5 (brown) is invalid: best is start 4, end 5.
    assert (pred.text, pred.start_char, pred.end_char) == ("quick brown", 4, 15)
    assert pred.score == pytest.approx(2 + 3)
    assert pred.nbest[0]["start_token"] == 4 and pred.nbest[0]["end_token"] == 5


def test_max_answer_length():
    start = logits({3: 5})
    end = logits({7: 5, 4: 1})
    long = decode_answer(CONTEXT, [(start, end, OFFSETS)], max_answer_length=30,
                         version_2_with_negative=False)
    assert long.text == CONTEXT
    short = decode_answer(CONTEXT, [(start, end, OFFSETS)], max_answer_length=2,
                          version_2_with_negative=False)
    assert short.text == "the quick"


def test_best_span_across_windows_and_dedup():
    # Two windows over the same context; the second scores "fox" higher.
    w1 = (logits({6: 2}), logits({6: 2}), OFFSETS)
    w2 = (logits({6: 4}), logits({6: 3}), OFFSETS)
    pred = decode_answer(CONTEXT, [w1, w2], n_best_size=5)
    assert pred.text == "fox" and pred.window == 1 and pred.score == pytest.approx(7)
    texts = [c["text"] for c in pred.nbest]
    assert len(texts) == len(set(texts))  # "fox" once, with its best score
    assert sum(c["probability"] for c in pred.nbest) == pytest.approx(1.0)


def test_token_is_max_context_restricts_starts():
    start, end = logits({6: 4}), logits({6: 4, 7: 1})
    mask = np.ones(T, bool)
    mask[6] = False
    pred = decode_answer(CONTEXT, [(start, end, OFFSETS, mask)],
                         version_2_with_negative=False)
    assert pred.start_char != 16


def test_null_threshold_squad_v2():
    # span "brown fox" scores 4 + 3 = 7; null score min over windows of start[0] + end[0].
    w1 = (logits({0: 5, 5: 4}), logits({0: 5, 6: 3}), OFFSETS)   # null 10
    w2 = (logits({0: 4, 5: 1}), logits({0: 4, 6: 1}), OFFSETS)   # null 8
    pred = decode_answer(CONTEXT, [w1, w2])
    assert pred.null_score == pytest.approx(8.0)
    assert pred.score_diff == pytest.approx(1.0)
    assert pred.text == "" and pred.is_null and pred.start_char == -1
    assert pred.nbest[0]["text"] == "brown fox"  # still reported
    answered = decode_answer(CONTEXT, [w1, w2], null_score_diff_threshold=1.5)
    assert (answered.text, answered.start_char, answered.end_char) == ("brown fox", 10, 19)
    v1 = decode_answer(CONTEXT, [w1, w2], version_2_with_negative=False)
    assert v1.text == "brown fox"


def test_no_context_token_gives_no_answer():
    offsets = np.full((T, 2), -1)
    pred = decode_answer(CONTEXT, [(logits({}), logits({}), offsets)],
                         version_2_with_negative=False)
    assert pred.text == "" and pred.score == -np.inf and pred.nbest == []


def test_decode_answers_groups_windows_by_example():
    contexts = [CONTEXT, "jumps over"]
    offsets2 = np.array([(-1, -1)] * 3 + [(0, 5), (6, 10)] + [(-1, -1)] * 5)
    start = np.stack([logits({3: 3}), logits({7: 6}), logits({4: 2})])
    end = np.stack([logits({3: 3}), logits({7: 6}), logits({4: 2})])
    offsets = np.stack([OFFSETS, OFFSETS, offsets2])
    preds = decode_answers(contexts, start, end, offsets, [0, 0, 1],
                           version_2_with_negative=False)
    assert [p.text for p in preds] == ["jumps", "over"]
    with pytest.raises(ValueError, match="example_index"):
        decode_answers(contexts, start, end, offsets, [0, 0, 2])
    with pytest.raises(ValueError, match=r"offsets must be \[T, 2\]"):
        window_spans(start[0], end[0], OFFSETS[:5])
