"""Planning pretraining instances as integer spans into a TokenizedChunk
(kerasbert.data.instances explains the algorithm): sentence pairs for NSP /
SOP (`plan_pairs`, the original's accumulation loop) and FULL-SENTENCES
packing (`plan_full_sentences`). Uniform draws come from numpy in blocks
(`Draws`); the small helper classes exist only for these loops.
"""

import bisect

import numpy as np


class Draws:
    """Uniform floats from a Generator in blocks: one numpy call per 1,024
    draws instead of one (~0.5 us) per draw in the planning loops."""

    __slots__ = ("rng", "buf", "i")

    def __init__(self, rng):
        self.rng, self.buf, self.i = rng, [], 0

    def random(self):
        if self.i == len(self.buf):
            self.buf, self.i = self.rng.random(1024).tolist(), 0
        self.i += 1
        return self.buf[self.i - 1]

    def randint(self, low, high):
        """Uniform int in [low, high)."""
        return low + int(self.random() * (high - low))


class OtherDocuments:
    """A sequence of document indices without one of them (NSP's buffer of
    other documents), without copying the list per document."""

    __slots__ = ("docs", "skip")

    def __init__(self, docs, skip):
        self.docs, self.skip = docs, skip

    def __len__(self):
        return len(self.docs) - 1

    def __getitem__(self, i):
        return self.docs[i + (i >= self.skip)]


# ---------------------------------------------------------------- planning


class PairPlan:
    """Planned sentence-pair instances: spans into a TokenizedChunk."""

    def __init__(self):
        self.a0, self.a1, self.b0, self.b1 = [], [], [], []
        self.labels, self.targets = [], []

    def add(self, a0, a1, b0, b1, label, target):
        self.a0.append(a0)
        self.a1.append(a1)
        self.b0.append(b0)
        self.b1.append(b1)
        self.labels.append(label)
        self.targets.append(target)

    def __len__(self):
        return len(self.a0)


def _split_at_word(starts, a0, a1, draws):
    """Span [a0, a1) cut at a random word start -> (a0, cut, cut, a1), or None."""
    cuts = np.flatnonzero(starts[a0 + 1:a1])
    if not len(cuts):
        return None
    cut = a0 + 1 + int(cuts[draws.randint(0, len(cuts))])
    return a0, cut, cut, a1


def plan_pairs(chunk, d, others, options, draws, plan):
    """Plans the NSP / SOP instances of document d of `chunk`.

    others: indices of OTHER non-empty documents of the chunk (NSP's random
    B buffer; may be empty). The loop is the original's: accumulate
    sentences up to a target length (shorter with short_seq_prob), split
    them into A and B at a random sentence, put unused ones back."""
    bounds = chunk.bounds[d]
    n_sent = len(bounds) - 1
    max_num_tokens = options.sequence_length - 3
    # Chosen once per document, as in the original.
    target = max_num_tokens
    if draws.random() < options.short_seq_prob:
        target = draws.randint(2, max_num_tokens + 1)
    sop = options.objective == "sop"
    first, i = 0, 0  # The accumulated segments are sentences first..i.
    while i < n_sent:
        if i == n_sent - 1 or bounds[i + 1] - bounds[first] >= target:
            n_seg = i - first + 1
            a_end = first + (draws.randint(1, n_seg) if n_seg >= 2 else 1)
            a0, a1, end = bounds[first], bounds[a_end], bounds[i + 1]
            if sop:
                pair = _sop_pair(chunk, a0, a1, end, n_seg, draws)
            else:
                pair = _nsp_pair(chunk, a0, a1, end, n_seg, target, others, draws)
                if pair is not None and pair[4] == 1:
                    i = a_end - 1  # Put the unused segments back.
            if pair is not None:
                plan.add(*pair, target)
            first = i + 1
        i += 1


def _nsp_pair(chunk, a0, a1, end, n_seg, target, others, draws):
    """(a0, a1, b0, b1, label) or None when nothing can pair.

    A one-segment chunk is cut at a random word boundary when the coin says
    "real next" (the original forces a random B there, which skews labels to
    ~57% random on corpora of short documents)."""
    halves = _split_at_word(chunk.starts, a0, a1, draws) if n_seg == 1 else None
    real_next_possible = n_seg >= 2 or halves is not None
    if len(others) and (not real_next_possible or draws.random() < 0.5):
        other = chunk.bounds[others[draws.randint(0, len(others))]]
        n_other = len(other) - 1
        start = draws.randint(0, n_other)
        # Sentences from `start` until they reach the length A leaves free
        # (at least one): the first offset >= other[start] + that length.
        stop = bisect.bisect_left(other, other[start] + target - (a1 - a0), start + 1)
        return a0, a1, other[start], other[min(stop, n_other)], 1
    if not real_next_possible:
        return None
    if halves is not None:
        return (*halves, 0)
    return a0, a1, a1, end, 0


def _sop_pair(chunk, a0, a1, end, n_seg, draws):
    """(a0, a1, b0, b1, label): consecutive segments, swapped (label 1) with p=0.5."""
    if n_seg >= 2:
        pair = (a0, a1, a1, end)
    else:
        pair = _split_at_word(chunk.starts, a0, a1, draws)
        if pair is None:
            return None
    if draws.random() < 0.5:
        return pair[2], pair[3], pair[0], pair[1], 1
    return (*pair, 0)


DOCUMENT_SEP = None  # A document boundary inside a FULL-SENTENCES instance.


def plan_full_sentences(chunk, options):
    """RoBERTa FULL-SENTENCES: lists of spans (and DOCUMENT_SEP) per instance.

    Contiguous full sentences are packed up to sequence_length - 2 tokens and
    MAY CROSS DOCUMENT BOUNDARIES, as in RoBERTa; a [SEP] marks each boundary
    inside a sequence (RoBERTa's extra separator). A sentence longer than
    the budget is cut into budget-sized pieces."""
    budget = options.sequence_length - 2
    planned, cur, cur_len = [], [], 0

    def flush():
        if cur and cur[-1] is DOCUMENT_SEP:
            cur.pop()
        if cur:
            planned.append(list(cur))
        cur.clear()
        return 0

    for bounds in chunk.bounds:
        for s, e in zip(bounds, bounds[1:]):
            while s < e:
                if cur_len + (e - s) <= budget:
                    cur.append((s, e))
                    cur_len += e - s
                    break
                if cur:
                    cur_len = flush()
                    continue
                # One sentence longer than the budget: cut it.
                cur.append((s, s + budget))
                cur_len = flush()
                s += budget
        if cur and cur_len < budget:
            cur.append(DOCUMENT_SEP)  # Document boundary.
            cur_len += 1
    flush()
    return planned
