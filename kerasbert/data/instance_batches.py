"""Planned instances -> padded [N, T] arrays (`Batch`): truncation, the
`[CLS] A [SEP] B [SEP]` assembly and static masking on whole batches
(kerasbert.data.instances explains the algorithm).
"""

import dataclasses

import numpy as np

from kerasbert.data.instance_planning import DOCUMENT_SEP
from kerasbert.data.instance_types import Instance


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


def pair_batch(chunk, plan, options, specials, rng, with_starts):
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


def span_batch(chunk, planned, options, specials):
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
            if item is DOCUMENT_SEP:
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
