"""Pretraining instances from tokenized documents: pure functions.

Documents in, instances out: no I/O, no globals, randomness only from the
`numpy.random.Generator` passed in, so a cluster runner can call these
directly. The algorithm is google-research/bert's `create_pretraining_data.py`
(chunk accumulation, NSP with a random B from another document, unused
segments put back, `truncate_seq_pair`, static masking), with ALBERT's SOP
and RoBERTa's FULL-SENTENCES packing as alternatives.

A tokenized document is a list of sentences; a sentence a list of words; a
word a list of wordpiece ids. Word boundaries are kept so whole-word masking
never splits a word.

How it is fast (the writer makes ~30,000 instances per MB of text at the
default dupe factor 10, so per-instance Python is the cost that matters):
  * the documents of a batch are flattened once into one id array
    (`TokenizedChunk`); the per-document logic only PLANS instances as
    integer spans into it (`_plan_pairs`, `_plan_full_sentences`), with
    uniforms drawn from numpy in blocks (`_Draws`);
  * truncation, assembly `[CLS] A [SEP] B [SEP]`, masking and the
    tf.train.Example serialization then run on whole [N, T] numpy arrays
    (`Batch`, `mask_batch`, `ExampleEncoder.encode_batch`).
The per-document functions (`create_instances_from_document`, ...) are thin
wrappers over the same code, so the statistical tests check what the writer
runs.

Deliberate differences from the original, all documented here:
  * num_to_predict counts MASKABLE tokens (not [CLS]/[SEP]), so the chosen
    fraction is exactly masked_lm_prob of the tokens that can be chosen (the
    original's counts the 3 specials too: 15.4% at length 128).
  * The random B of NSP comes from `other_documents` (a bounded buffer of
    nearby documents the caller passes in), not the whole corpus, so the
    corpus never has to be in memory. With no other document, B is the real
    next segment; a lone segment with nothing to pair is dropped.
  * NSP with a one-segment chunk: "real next" cuts the segment at a random
    word boundary instead of always taking a random B, so labels stay 50/50.
  * SOP with a one-segment chunk splits that segment at a random word
    boundary (ALBERT pairs it with a random document instead, which is not
    an order-swap example).
  * truncate_seq_pair draws how many of a side's cuts come from the front
    as one Binomial(cuts, 1/2) instead of one coin per token (the same
    distribution; which side is cut how much is the original's rule).
"""

import bisect
import dataclasses

import numpy as np

from kerasbert.data import schema


@dataclasses.dataclass(frozen=True)
class Specials:
    """Special token ids, looked up by string in the vocabulary (never assumed)."""

    cls_id: int
    sep_id: int
    mask_id: int
    pad_id: int
    vocab_size: int


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    sequence_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    whole_word_mask: bool = False
    objective: str = "nsp"  # "nsp" | "sop" | "none"
    masking: bool = True


@dataclasses.dataclass
class Instance:
    """One training sequence (unpadded Python lists).

    tokens:          [L] ids of `[CLS] A [SEP] B [SEP]` (or `[CLS] A [SEP]`),
                     masked ids already substituted when masked.
    segment_ids:     [L] 0 for [CLS] A [SEP], 1 for B [SEP].
    word_starts:     [L] True where a word begins (specials are words).
    label:           1 = B random (NSP) / swapped (SOP), 0 = real order,
                     None for objective "none".
    masked_positions, masked_ids: [P] sorted positions and ORIGINAL ids.
    target_length:   the target the chunk aimed at (statistics only).
    """

    tokens: list
    segment_ids: list
    word_starts: list
    label: object = None
    masked_positions: list = dataclasses.field(default_factory=list)
    masked_ids: list = dataclasses.field(default_factory=list)
    target_length: int = 0


# ---------------------------------------------------------------- documents


def flatten_sentence(words):
    """[[ids of word 1], [ids of word 2], ...] -> (ids [n], word_starts [n])."""
    ids, starts = [], []
    for word in words:
        if not word:
            continue
        ids.extend(word)
        starts.append(True)
        starts.extend([False] * (len(word) - 1))
    return ids, starts


def prepare_document(document):
    """Tokenized document -> list of (ids, word_starts) per non-empty sentence."""
    prepared = []
    for sentence in document:
        ids, starts = sentence if isinstance(sentence, tuple) else flatten_sentence(sentence)
        if len(ids):
            prepared.append((list(ids), list(starts)))
    return prepared


class TokenizedChunk:
    """Documents flattened into one array: what instances are planned over.

    ids:    int64 [total] every document's wordpieces, in order;
    starts: bool [total], True where a word begins;
    bounds: per document, sentence offsets [o_0, ..., o_S] into ids
            (sentence i is ids[o_i:o_{i+1}]; empty sentences removed, so a
            document without tokens has bounds [o_0]).
    """

    __slots__ = ("ids", "starts", "bounds")

    def __init__(self, ids, starts, bounds):
        self.ids = np.asarray(ids, dtype=np.int64)
        self.starts = np.asarray(starts, dtype=bool)
        self.bounds = bounds

    @classmethod
    def from_documents(cls, documents):
        """From tokenized documents (words structure or `prepare_document` form)."""
        ids, starts, bounds = [], [], []
        for document in documents:
            offsets = [len(ids)]
            for sentence in document:
                s_ids, s_starts = (
                    sentence if isinstance(sentence, tuple) else flatten_sentence(sentence)
                )
                if len(s_ids):
                    ids.extend(s_ids)
                    starts.extend(s_starts)
                    offsets.append(len(ids))
            bounds.append(offsets)
        return cls(ids, starts, bounds)

    @classmethod
    def from_sentences(cls, ids, starts, sentence_offsets, doc_sentences):
        """From flat tokenizer output: sentence_offsets [S + 1] into ids, and
        the number of sentences of each document in order."""
        offsets = np.asarray(sentence_offsets).tolist()
        bounds, s = [], 0
        for count in doc_sentences:
            doc = offsets[s:s + count + 1]
            # Drop empty sentences (equal consecutive offsets).
            bounds.append([doc[0]] + [o for p, o in zip(doc, doc[1:]) if o > p])
            s += count
        return cls(ids, starts, bounds)

    def __len__(self):
        return len(self.bounds)


class _Draws:
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


class _Others:
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


class _PairPlan:
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


def _plan_pairs(chunk, d, others, options, draws, plan):
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


_SEP = None  # A document boundary inside a FULL-SENTENCES instance.


def _plan_full_sentences(chunk, options):
    """RoBERTa FULL-SENTENCES: lists of spans (and _SEP) per instance.

    Contiguous full sentences are packed up to sequence_length - 2 tokens and
    MAY CROSS DOCUMENT BOUNDARIES, as in RoBERTa; a [SEP] marks each boundary
    inside a sequence (RoBERTa's extra separator). A sentence longer than
    the budget is cut into budget-sized pieces."""
    budget = options.sequence_length - 2
    planned, cur, cur_len = [], [], 0

    def flush():
        if cur and cur[-1] is _SEP:
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
            cur.append(_SEP)  # Document boundary.
            cur_len += 1
    flush()
    return planned


# ---------------------------------------------------------------- batches


def truncation_cuts(len_a, len_b, max_num_tokens):
    """Tokens the original truncate_seq_pair removes from A and from B.

    It cuts the longer side one token at a time (B on ties) until the pair
    fits: the longer side down to the shorter, then alternately B, A, ...
    Works on ints and on numpy arrays."""
    excess = np.maximum(len_a + len_b - max_num_tokens, 0)
    a_longer = len_a > len_b
    gap = np.abs(len_a - len_b)
    rest = np.maximum(excess - gap, 0)
    one_side = excess <= gap
    cut_a = np.where(one_side, np.where(a_longer, excess, 0), np.where(a_longer, gap, 0) + rest // 2)
    cut_b = np.where(one_side, np.where(a_longer, 0, excess),
                     np.where(a_longer, 0, gap) + (rest + 1) // 2)
    return cut_a, cut_b


def truncate_seq_pair(a, b, max_num_tokens, rng):
    """Truncates two (ids, starts) pairs in place to a joint length.

    As the original: the longer side is cut (see truncation_cuts), each cut
    from the front or the back with equal probability; a front cut makes
    the next piece a word start."""
    cuts = truncation_cuts(len(a[0]), len(b[0]), max_num_tokens)
    for (ids, starts), cut in zip((a, b), cuts):
        cut = int(cut)
        if cut:
            front = int(rng.binomial(cut, 0.5))
            end = len(ids) - (cut - front)
            ids[:] = ids[front:end]
            starts[:] = starts[front:end]
            if front and starts:
                starts[0] = True


@dataclasses.dataclass
class Batch:
    """N instances as padded arrays (what the encoder serializes).

    tokens [N, T] int64 (0 past the length), lengths [N], segments [N, T]
    uint8, starts [N, T] bool or None, labels [N] or None, targets [N];
    after masking: positions / masked_ids [N, P] (0-padded), counts [N]."""

    tokens: np.ndarray
    lengths: np.ndarray
    segments: np.ndarray
    starts: object
    labels: object
    targets: np.ndarray
    positions: object = None
    masked_ids: object = None
    counts: object = None

    def __len__(self):
        return len(self.lengths)

    def to_instances(self):
        """-> list of `Instance` (unpadded Python lists)."""
        out = []
        tokens, segments = self.tokens.tolist(), self.segments.tolist()
        starts = self.starts.tolist() if self.starts is not None else None
        for r, n in enumerate(self.lengths.tolist()):
            inst = Instance(
                tokens[r][:n], segments[r][:n], starts[r][:n] if starts else [],
                None if self.labels is None else int(self.labels[r]),
                target_length=int(self.targets[r]),
            )
            if self.positions is not None:
                k = int(self.counts[r])
                inst.masked_positions = self.positions[r, :k].tolist()
                inst.masked_ids = self.masked_ids[r, :k].tolist()
            out.append(inst)
        return out


def _pair_batch(chunk, plan, options, specials, rng, with_starts):
    """`[CLS] A [SEP] B [SEP]` for every planned pair, truncated."""
    a0, a1, b0, b1 = (np.asarray(x, dtype=np.int64) for x in (plan.a0, plan.a1, plan.b0, plan.b1))
    cut_a, cut_b = truncation_cuts(a1 - a0, b1 - b0, options.sequence_length - 3)
    front_a, front_b = rng.binomial(cut_a, 0.5), rng.binomial(cut_b, 0.5)
    a0, a1 = a0 + front_a, a1 - (cut_a - front_a)
    b0, b1 = b0 + front_b, b1 - (cut_b - front_b)
    n, T = len(a0), options.sequence_length
    la, lb = a1 - a0, b1 - b0
    lengths = la + lb + 3
    b_first = la + 2
    col = np.arange(T)
    in_a = (col >= 1) & (col <= la[:, None])
    in_b = (col >= b_first[:, None]) & (col < (b_first + lb)[:, None])
    body = in_a | in_b
    src = np.where(in_a, (a0 - 1)[:, None] + col, (b0 - b_first)[:, None] + col)
    src = np.where(body, src, 0)
    tokens = np.where(body, chunk.ids[src], specials.pad_id)
    rows = np.arange(n)
    tokens[:, 0] = specials.cls_id
    tokens[rows, la + 1] = specials.sep_id
    tokens[rows, lengths - 1] = specials.sep_id
    segments = ((col >= b_first[:, None]) & (col < lengths[:, None])).astype(np.uint8)
    starts = None
    if with_starts:
        # Specials are words; A and B start with a word (a front cut or a
        # split may land mid-word).
        starts = np.where(body, chunk.starts[src], col < lengths[:, None])
        starts[:, 1] = True
        starts[rows, b_first] = True
    return Batch(tokens, lengths, segments, starts,
                 np.asarray(plan.labels, dtype=np.int64), np.asarray(plan.targets))


def _span_batch(chunk, planned, options, specials):
    """`[CLS] spans... [SEP]` for FULL-SENTENCES instances (one segment)."""
    n, T = len(planned), options.sequence_length
    cls_at, sep_at = len(chunk.ids), len(chunk.ids) + 1
    ids = np.concatenate([chunk.ids, [specials.cls_id, specials.sep_id]])
    word_starts = np.concatenate([chunk.starts, [True, True]])
    src = np.full((n, T), -1, dtype=np.int64)
    forced_rows, forced_cols, lengths = [], [], []
    for r, items in enumerate(planned):
        index = [cls_at]
        for item in items:
            if item is _SEP:
                index.append(sep_at)
            else:
                forced_rows.append(r)
                forced_cols.append(len(index))  # A piece starts a word.
                index.extend(range(*item))
        index.append(sep_at)
        src[r, :len(index)] = index
        lengths.append(len(index))
    real = src >= 0
    tokens = np.where(real, ids[src], specials.pad_id)
    starts = np.where(real, word_starts[src], False)
    starts[forced_rows, forced_cols] = True
    return Batch(tokens, np.asarray(lengths, dtype=np.int64), np.zeros((n, T), np.uint8),
                 starts, None, np.full(n, T - 2))


def mask_batch(batch, options, specials, rng):
    """Static masked LM on a whole Batch, in place.

    Per instance: num_to_predict = min(max_predictions_per_seq,
    max(1, round(n * masked_lm_prob))) of its n maskable tokens (never
    [CLS]/[SEP]/[PAD]), chosen uniformly (whole words together when
    whole_word_mask; a word that would exceed the count is skipped, as in
    the original). Of the chosen: 80% -> [MASK], 10% -> random id in
    [0, vocab_size), 10% kept. Sets positions / masked_ids (sorted
    positions, original ids, 0-padded to P) and counts."""
    tokens = batch.tokens
    n, T = tokens.shape
    P = options.max_predictions_per_seq
    col = np.arange(T)
    maskable = (
        (col < batch.lengths[:, None])
        & (tokens != specials.cls_id) & (tokens != specials.sep_id) & (tokens != specials.pad_id)
    )
    n_maskable = maskable.sum(1)
    k = np.minimum(P, np.maximum(1, np.rint(n_maskable * options.masked_lm_prob).astype(np.int64)))
    k[n_maskable == 0] = 0
    if options.whole_word_mask:
        positions = _whole_word_positions(maskable, batch.starts, k, P, rng)
    else:
        # A random order of the maskable positions (others sort last); the
        # first k of it, sorted.
        keys = np.where(maskable, rng.random((n, T)), 2.0)
        order = np.argsort(keys, axis=1)[:, :P]
        positions = np.where(np.arange(P) < k[:, None], order, T)
        positions.sort(axis=1)
    valid = positions < T
    positions = np.where(valid, positions, 0)
    rows = np.arange(n)[:, None]
    original = np.where(valid, tokens[rows, positions], 0)
    u = rng.random((2, n, P))
    random_ids = rng.integers(0, specials.vocab_size, size=(n, P))
    new = np.where(u[0] < 0.8, specials.mask_id, np.where(u[1] >= 0.5, random_ids, original))
    r, c = np.nonzero(valid)
    tokens[r, positions[r, c]] = new[r, c]
    batch.positions, batch.masked_ids, batch.counts = positions, original, valid.sum(1)
    return batch


def _whole_word_positions(maskable, starts, k, P, rng):
    """[N, P] chosen positions (T past the count) choosing whole words."""
    n, T = maskable.shape
    out = np.full((n, P), T, dtype=np.int64)
    keys = rng.random((n, T)).tolist()
    maskable_rows, starts_rows = maskable.tolist(), starts.tolist()
    for r in range(n):
        row, word_start, want = maskable_rows[r], starts_rows[r], int(k[r])
        groups, prev = [], -2
        for i in range(T):
            if not row[i]:
                continue
            # A piece continues the previous word only if it is adjacent to
            # it and not a word start (a special in between ends the word).
            if groups and prev == i - 1 and not word_start[i]:
                groups[-1].append(i)
            else:
                groups.append([i])
            prev = i
        order = sorted(range(len(groups)), key=keys[r].__getitem__)
        chosen = []
        for g in order:
            if len(chosen) >= want:
                break
            if len(chosen) + len(groups[g]) <= want:
                chosen.extend(groups[g])
        chosen.sort()
        out[r, :len(chosen)] = chosen
    return out


def chunk_batches(chunk, options, specials, rng, dupe_factor=1):
    """Yields one masked (unless options.masking is False) Batch per dupe of
    a TokenizedChunk: the writer's unit of work. NSP's random B comes from
    the chunk's other documents."""
    docs = [d for d, bounds in enumerate(chunk.bounds) if len(bounds) > 1]
    draws = _Draws(rng)
    with_starts = options.whole_word_mask
    for _ in range(dupe_factor):
        if options.objective == "none":
            planned = _plan_full_sentences(chunk, options)
            if not planned:
                continue
            batch = _span_batch(chunk, planned, options, specials)
        else:
            plan = _PairPlan()
            for j, d in enumerate(docs):
                _plan_pairs(chunk, d, _Others(docs, j), options, draws, plan)
            if not len(plan):
                continue
            batch = _pair_batch(chunk, plan, options, specials, rng, with_starts)
        if options.masking:
            mask_batch(batch, options, specials, rng)
        yield batch


# ------------------------------------------------- per-document interface


def create_instances_from_document(document, other_documents, options, specials, rng):
    """Instances (NSP or SOP) from one document.

    document:        tokenized document (words structure) or `prepare_document`
                     output.
    other_documents: a bounded buffer of OTHER documents (same forms) from
                     which NSP draws random B segments; may be empty.
    rng:             numpy Generator, derived by the caller from
                     (seed, dupe, document index) for reproducibility.
    Returns a list of `Instance`.
    """
    chunk = TokenizedChunk.from_documents([document, *other_documents])
    others = [d for d in range(1, len(chunk)) if len(chunk.bounds[d]) > 1]
    plan = _PairPlan()
    _plan_pairs(chunk, 0, others, options, _Draws(rng), plan)
    if not len(plan):
        return []
    batch = _pair_batch(chunk, plan, options, specials, rng, with_starts=True)
    if options.masking:
        mask_batch(batch, options, specials, rng)
    return batch.to_instances()


def create_full_sentence_instances(documents, options, specials, rng):
    """RoBERTa FULL-SENTENCES: `[CLS] s1 s2 ... [SEP]`, single segment.

    Contiguous full sentences are packed up to sequence_length - 2 tokens and
    MAY CROSS DOCUMENT BOUNDARIES, as in RoBERTa; a [SEP] marks each boundary
    inside a sequence. Crossing happens within the `documents` passed
    together (one writer chunk), so this stays a pure function of its
    inputs. No short sequences, no sentence label.
    """
    chunk = TokenizedChunk.from_documents(documents)
    planned = _plan_full_sentences(chunk, options)
    if not planned:
        return []
    batch = _span_batch(chunk, planned, options, specials)
    if options.masking:
        mask_batch(batch, options, specials, rng)
    return batch.to_instances()


# ---------------------------------------------------------------- encoding


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


class _VarintTable:
    """Varint bytes of 0..size-1 as a [size, width] byte table plus lengths,
    so a whole id array is varint-encoded with two gathers and one compaction."""

    def __init__(self, size):
        self.size = size
        self.width = max(1, ((size - 1).bit_length() + 6) // 7)
        v = np.arange(size, dtype=np.int64)
        self.lengths = np.ones(size, dtype=np.int64)
        for j in range(1, self.width):
            self.lengths += v >= (1 << (7 * j))
        self.table = np.zeros((size, self.width), dtype=np.uint8)
        for j in range(self.width):
            self.table[:, j] = ((v >> (7 * j)) & 0x7F) | ((self.lengths > j + 1) << 7)

    def rows(self, values):
        """[N, K] ints in [0, size) -> (packed varints of all rows as bytes,
        row offsets [N + 1] as a list)."""
        if values.size and (int(values.max()) >= self.size or int(values.min()) < 0):
            raise ValueError(f"Id outside [0, {self.size}): cannot encode.")
        nbytes = self.lengths[values]
        keep = np.arange(self.width) < nbytes[..., None]
        packed = self.table[values].ravel().compress(keep.ravel()).tobytes()
        offsets = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(nbytes.sum(1), out=offsets[1:])
        return packed, offsets


class ExampleEncoder:
    """Serializes instances as `tf.train.Example` bytes, without protobuf.

    Building tf.train.Example messages costs more than making the instance;
    this writes the same wire format directly (packed varint Int64List,
    packed fixed32 FloatList, map entries in schema order), so the output
    parses with `tf.io.parse_example` and `tf.train.Example.FromString`.
    A whole Batch is encoded at once: varints by table lookups in numpy,
    feature headers from tables indexed by payload length, so per record
    only one bytes.join runs in Python. Feature names come from
    kerasbert.data.schema. Fixed lengths: sequence features
    [sequence_length], masked_lm_* [max_predictions_per_seq],
    next_sentence_labels [1]. input_ids are padded with `pad_id` (0 is
    BERT's [PAD]; RoBERTa's <pad> is 1), everything else with 0 (0.0 for
    weights).
    """

    def __init__(self, vocab_size, sequence_length, max_predictions_per_seq, objective, masked,
                 pad_id=0):
        self.pad_id = int(pad_id)
        self.names = schema.feature_names(objective, masked)
        self.sequence_length = T = sequence_length
        self.max_predictions = P = max_predictions_per_seq
        self._varints = _VarintTable(max(vocab_size, T, 2) + 1)
        self._small = [_varint(n) for n in range(1 << 14)]
        width = self._varints.width
        # Headers indexed by payload length, for every length possible.
        self._ids_header = [self._header("input_ids", b"\x1a", n) for n in range(T * width + 1)]
        self._mids_header = [self._header("masked_lm_ids", b"\x1a", n) for n in range(P * width + 1)]
        self._pos_header = [self._header("masked_lm_positions", b"\x1a", n)
                            for n in range(P * width + 1)]
        self._seg_header = self._header("segment_ids", b"\x1a", T)
        # Whole entries that depend only on a count.
        self._mask_entry = [
            self._entry("input_mask", b"\x1a", b"\x01" * n + b"\x00" * (T - n)) for n in range(T + 1)
        ]
        self._weights_entry = [
            self._entry("masked_lm_weights", b"\x12",
                        b"\x00\x00\x80\x3f" * k + b"\x00\x00\x00\x00" * (P - k))
            for k in range(P + 1)
        ]
        self._label_entry = [self._entry("next_sentence_labels", b"\x1a", bytes([v])) for v in (0, 1)]

    def _uvarint(self, n):
        return self._small[n] if n < len(self._small) else _varint(n)

    def _header(self, name, tag, n):
        """The bytes of a feature-map entry up to its payload of n bytes
        (tag b"\\x1a" Int64List, b"\\x12" FloatList; payload = packed values)."""
        v = self._uvarint
        values = b"\x0a" + v(n)  # The list's packed `value` field.
        feature = tag + v(len(values) + n) + values
        entry = b"\x0a" + v(len(name)) + name.encode() + b"\x12" + v(len(feature) + n) + feature
        return b"\x0a" + v(len(entry) + n) + entry

    def _entry(self, name, tag, payload):
        return self._header(name, tag, len(payload)) + payload

    def encode_batch(self, batch):
        """Batch -> list of serialized tf.train.Example bytes, in order."""
        T = self.sequence_length
        n = len(batch)
        if n and int(batch.lengths.max()) > T:
            raise ValueError(f"Instance of length {int(batch.lengths.max())} > sequence_length {T}.")
        if not n:
            return []
        columns, sizes = [], np.zeros(n, dtype=np.int64)

        def add(parts):
            columns.append(parts)

        def add_varints(values, headers):
            packed, offsets = self._varints.rows(values)
            lengths = np.diff(offsets)
            nonlocal sizes
            sizes = sizes + lengths + np.array([len(h) for h in headers])[lengths]
            offsets = offsets.tolist()
            add([headers[k] for k in lengths.tolist()])
            add([packed[a:b] for a, b in zip(offsets, offsets[1:])])

        def add_entries(table, index):
            nonlocal sizes
            sizes = sizes + np.array([len(e) for e in table])[index]
            add([table[k] for k in index.tolist()])

        add_varints(batch.tokens, self._ids_header)
        add_entries(self._mask_entry, batch.lengths)
        segments = batch.segments.astype(np.uint8).tobytes()  # 0/1: one byte each.
        add([self._seg_header] * n)
        add([segments[r * T:(r + 1) * T] for r in range(n)])
        sizes += len(self._seg_header) + T
        if "masked_lm_positions" in self.names:
            add_varints(batch.positions, self._pos_header)
            add_varints(batch.masked_ids, self._mids_header)
            add_entries(self._weights_entry, batch.counts)
        if "next_sentence_labels" in self.names:
            add_entries(self._label_entry, batch.labels)
        starts = [b"\x0a" + self._uvarint(k) for k in sizes.tolist()]
        return [b"".join(parts) for parts in zip(starts, *columns)]

    def encode(self, instance):
        """One `Instance` -> serialized tf.train.Example bytes."""
        T, P = self.sequence_length, self.max_predictions
        n = len(instance.tokens)
        if n > T:
            raise ValueError(f"Instance of length {n} > sequence_length {T}.")
        tokens = np.full((1, T), self.pad_id, dtype=np.int64)
        tokens[0, :n] = instance.tokens
        segments = np.zeros((1, T), dtype=np.uint8)
        segments[0, :n] = instance.segment_ids
        k = len(instance.masked_positions)
        positions = np.zeros((1, P), dtype=np.int64)
        masked_ids = np.zeros((1, P), dtype=np.int64)
        positions[0, :k] = instance.masked_positions
        masked_ids[0, :k] = instance.masked_ids
        label = np.array([0 if instance.label is None else int(instance.label)])
        batch = Batch(tokens, np.array([n]), segments, None, label, np.array([n]),
                      positions, masked_ids, np.array([k]))
        return self.encode_batch(batch)[0]
