"""Pretraining instances from tokenized documents: pure functions.

Document in, instances out: no I/O, no globals, randomness only from the
`numpy.random.Generator` passed in, so a cluster runner can call these
directly. The algorithm is google-research/bert's `create_pretraining_data.py`
(chunk accumulation, NSP with a random B from another document, unused
segments put back, `truncate_seq_pair`, static masking), with ALBERT's SOP
and RoBERTa's FULL-SENTENCES packing as alternatives.

A tokenized document is a list of sentences; a sentence a list of words; a
word a list of wordpiece ids. Word boundaries are kept so whole-word masking
never splits a word.

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
"""

import dataclasses

import numpy as np


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
    max_seq_length: int = 128
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
    """Tokenized document -> list of (ids, word_starts) per non-empty sentence.

    Done once per document and reused for every dupe."""
    prepared = []
    for sentence in document:
        ids, starts = flatten_sentence(sentence)
        if ids:
            prepared.append((ids, starts))
    return prepared


def _is_prepared(document):
    return not document or isinstance(document[0], tuple)


def truncate_seq_pair(a, b, max_num_tokens, rng):
    """Truncates two (ids, starts) pairs in place to a joint length.

    As the original: always cut the longer one, from the front or the back
    with equal probability (a front cut makes the next piece a word start).
    The cuts are counted first and applied as one slice per side."""
    excess = len(a[0]) + len(b[0]) - max_num_tokens
    if excess <= 0:
        return
    la, lb = len(a[0]), len(b[0])
    cuts = [[0, 0], [0, 0]]  # [side][front, back]
    for coin in rng.random(excess).tolist():
        if la > lb:
            la -= 1
            cuts[0][coin >= 0.5] += 1
        else:
            lb -= 1
            cuts[1][coin >= 0.5] += 1
    for (ids, starts), (front, back) in zip((a, b), cuts):
        if front or back:
            end = len(ids) - back
            ids[:] = ids[front:end]
            starts[:] = starts[front:end]
            if front and starts:
                starts[0] = True


def _randint(rng, low, high):
    """Uniform int in [low, high): one float draw (cheaper than integers())."""
    return low + int(rng.random() * (high - low))


def _concat(segments):
    ids, starts = [], []
    for seg_ids, seg_starts in segments:
        ids.extend(seg_ids)
        starts.extend(seg_starts)
    return ids, starts


def _assemble(a, b, specials):
    """`[CLS] A [SEP] (B [SEP])` -> (tokens, segment_ids, word_starts)."""
    tokens = [specials.cls_id] + a[0] + [specials.sep_id]
    starts = [True] + a[1] + [True]
    segment_ids = [0] * len(tokens)
    if b is not None:
        tokens += b[0] + [specials.sep_id]
        starts += b[1] + [True]
        segment_ids += [1] * (len(b[0]) + 1)
    if starts[1] is False:  # A truncated from the front mid-word.
        starts[1] = True
    return tokens, segment_ids, starts


def _maskable_positions(tokens, unmaskable):
    """Positions of tokens not in `unmaskable`, found with C-speed
    list.index scans (a Python loop over every token costs ~5x more)."""
    found = set()
    for sid in unmaskable:
        j = -1
        while True:
            try:
                j = tokens.index(sid, j + 1)
            except ValueError:
                break
            found.add(j)
    cands, prev = [], 0
    for j in sorted(found):
        cands.extend(range(prev, j))
        prev = j + 1
    cands.extend(range(prev, len(tokens)))
    return cands


def mask_tokens(tokens, word_starts, options, specials, rng):
    """Static masked LM: returns (tokens, positions [P], original ids [P]).

    Chooses num_to_predict = min(max_predictions_per_seq,
    max(1, round(n * masked_lm_prob))) of the n maskable tokens (never
    [CLS]/[SEP]/[PAD]); whole words together when whole_word_mask (a word
    that would exceed the count is skipped, as in the original). Of the
    chosen: 80% -> [MASK], 10% -> random id in [0, vocab_size), 10% kept."""
    cands = _maskable_positions(tokens, (specials.cls_id, specials.sep_id, specials.pad_id))
    n_maskable = len(cands)
    if not n_maskable:
        return list(tokens), [], []
    num_to_predict = min(
        options.max_predictions_per_seq,
        max(1, int(round(n_maskable * options.masked_lm_prob))),
    )
    if options.whole_word_mask:
        groups = []
        prev = -2
        for i in cands:
            # A piece continues the previous word only if it is adjacent to
            # it and not a word start (a special in between ends the word).
            if groups and prev == i - 1 and not word_starts[i]:
                groups[-1].append(i)
            else:
                groups.append([i])
            prev = i
    else:
        groups = None
    n_order = len(groups) if groups is not None else n_maskable
    # One RNG call for everything (numpy calls cost more than the math):
    # [n_order] sort keys for a random order, then 3 draws per prediction.
    draws = rng.random(n_order + 3 * num_to_predict)
    order = draws[:n_order].argsort()
    if groups is not None:
        chosen = []
        for g in order.tolist():
            if len(chosen) >= num_to_predict:
                break
            group = groups[g]
            if len(chosen) + len(group) > num_to_predict:
                continue
            chosen.extend(group)
        chosen.sort()
    else:
        top = order[:num_to_predict]
        top.sort()
        chosen = [cands[j] for j in top.tolist()]
    k = len(chosen)
    rest = draws[n_order:n_order + 3 * k].tolist()
    u, v = rest[:k], rest[k:2 * k]
    vocab_size = specials.vocab_size
    random_ids = [int(x * vocab_size) for x in rest[2 * k:]]
    output = list(tokens)
    original = [tokens[pos] for pos in chosen]
    mask_id = specials.mask_id
    for j, pos in enumerate(chosen):
        if u[j] < 0.8:
            output[pos] = mask_id
        elif v[j] >= 0.5:  # else: 10% keep the original token.
            output[pos] = random_ids[j]
    return output, chosen, original


def _finish(a, b, label, target, options, specials, rng):
    tokens, segment_ids, starts = _assemble(a, b, specials)
    inst = Instance(tokens, segment_ids, starts, label, target_length=target)
    if options.masking:
        inst.tokens, inst.masked_positions, inst.masked_ids = mask_tokens(
            tokens, starts, options, specials, rng
        )
    return inst


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
    doc = document if _is_prepared(document) else prepare_document(document)
    max_num_tokens = options.max_seq_length - 3
    # Chosen once per document, as in the original.
    target = max_num_tokens
    if rng.random() < options.short_seq_prob:
        target = _randint(rng, 2, max_num_tokens + 1)
    instances = []
    chunk, chunk_len, i = [], 0, 0
    while i < len(doc):
        chunk.append(doc[i])
        chunk_len += len(doc[i][0])
        if i == len(doc) - 1 or chunk_len >= target:
            a_end = 1
            if len(chunk) >= 2:
                a_end = _randint(rng, 1, len(chunk))
            a = _concat(chunk[:a_end])
            if options.objective == "sop":
                pair = _sop_pair(chunk, a_end, a, rng)
            else:
                pair = _nsp_pair(chunk, a_end, a, target, other_documents, rng)
                if pair is not None and pair[3]:
                    i -= pair[3]  # Put the unused segments back.
            if pair is not None:
                a, b, label = pair[:3]
                truncate_seq_pair(a, b, max_num_tokens, rng)
                if a[0] and b[0]:
                    instances.append(_finish(a, b, label, target, options, specials, rng))
            chunk, chunk_len = [], 0
        i += 1
    return instances


def _split_at_word(segment, rng):
    """(ids, starts) -> two halves cut at a random word start, or None."""
    ids, starts = segment
    cuts = [k for k in range(1, len(ids)) if starts[k]]
    if not cuts:
        return None
    cut = cuts[_randint(rng, 0, len(cuts))]
    return (ids[:cut], starts[:cut]), (ids[cut:], starts[cut:])


def _nsp_pair(chunk, a_end, a, target, other_documents, rng):
    """(A, B, label, segments put back) or None when nothing can pair.

    A one-segment chunk is cut at a random word boundary when the coin says
    "real next" (the original forces a random B there, which skews labels to
    ~57% random on corpora of short documents)."""
    halves = None
    if len(chunk) == 1:
        halves = _split_at_word(a, rng)
    real_next_possible = len(chunk) >= 2 or halves is not None
    if other_documents and (not real_next_possible or rng.random() < 0.5):
        other = other_documents[_randint(rng, 0, len(other_documents))]
        other = other if _is_prepared(other) else prepare_document(other)
        if other:
            target_b = target - len(a[0])
            start = _randint(rng, 0, len(other))
            b_segments, b_len = [], 0
            for j in range(start, len(other)):
                b_segments.append(other[j])
                b_len += len(other[j][0])
                if b_len >= target_b:
                    break
            return a, _concat(b_segments), 1, len(chunk) - a_end
    if not real_next_possible:
        return None
    if halves is not None:
        return halves[0], halves[1], 0, 0
    return a, _concat(chunk[a_end:]), 0, 0


def _sop_pair(chunk, a_end, a, rng):
    """(A, B, label): consecutive segments, swapped (label 1) with p=0.5."""
    if len(chunk) >= 2:
        b = _concat(chunk[a_end:])
    else:
        halves = _split_at_word(a, rng)
        if halves is None:
            return None
        a, b = halves
    if rng.random() < 0.5:
        return b, a, 1
    return a, b, 0


def create_full_sentence_instances(documents, options, specials, rng):
    """RoBERTa FULL-SENTENCES: `[CLS] s1 s2 ... [SEP]`, single segment.

    Contiguous full sentences are packed up to max_seq_length - 2 tokens and
    MAY CROSS DOCUMENT BOUNDARIES, as in RoBERTa; a [SEP] marks each boundary
    inside a sequence (RoBERTa's extra separator). Crossing happens within
    the `documents` passed together (one writer chunk), so this stays a pure
    function of its inputs. A sentence longer than the budget is cut into
    budget-sized pieces. No short sequences, no sentence label.
    """
    budget = options.max_seq_length - 2
    instances = []
    cur_ids, cur_starts = [], []

    def flush():
        if cur_ids and cur_ids[-1] == specials.sep_id:
            del cur_ids[-1], cur_starts[-1]
        if cur_ids:
            instances.append(
                _finish((list(cur_ids), list(cur_starts)), None, None, budget, options, specials, rng)
            )
        cur_ids.clear()
        cur_starts.clear()

    for document in documents:
        doc = document if _is_prepared(document) else prepare_document(document)
        for ids, starts in doc:
            while ids:
                if len(cur_ids) + len(ids) > budget:
                    if cur_ids:
                        flush()
                        continue
                    # One sentence longer than the budget: cut it.
                    ids, rest = ids[:budget], ids[budget:]
                    starts, rest_starts = starts[:budget], starts[budget:]
                    cur_ids.extend(ids)
                    cur_starts.extend(starts)
                    flush()
                    ids, starts = rest, ([True] + rest_starts[1:]) if rest else rest
                    continue
                cur_ids.extend(ids)
                cur_starts.extend(starts)
                ids = []
        if cur_ids and len(cur_ids) < budget:
            cur_ids.append(specials.sep_id)  # Document boundary.
            cur_starts.append(True)
    flush()
    return instances


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


class ExampleEncoder:
    """Serializes instances as `tf.train.Example` bytes, without protobuf.

    Building tf.train.Example messages costs more than making the instance;
    this writes the same wire format directly (packed varint Int64List,
    packed fixed32 FloatList, map entries in schema order), so the output
    parses with `tf.io.parse_example` and `tf.train.Example.FromString`.
    Feature names come from kerasbert.data.schema. Fixed lengths: sequence
    features [max_seq_length], masked_lm_* [max_predictions_per_seq],
    next_sentence_labels [1]; padding is 0 (0.0 for weights).
    """

    def __init__(self, vocab_size, max_seq_length, max_predictions_per_seq, objective, masked):
        from kerasbert.data import schema

        self.names = schema.feature_names(objective, masked)
        self.max_seq_length = max_seq_length
        self.max_predictions = max_predictions_per_seq
        # One bytes object per id: join() over a table lookup beats encoding
        # varints per token in Python by ~10x.
        self._varints = [_varint(v) for v in range(max(vocab_size, 16 * max_seq_length + 64) + 1)]
        self._small_positions = max_seq_length <= 128
        self._mask_cache = {}
        self._keys = {
            name: b"\x0a" + _varint(len(name)) + name.encode() for name in self.names
        }

    def _int64_feature(self, name, values, length, small=False):
        # small: every value < 128, so each varint is the value's own byte.
        packed = bytes(values) if small else b"".join(map(self._varints.__getitem__, values))
        if length > len(values):
            packed += b"\x00" * (length - len(values))
        return self._entry(name, b"\x1a", b"\x0a" + self._len(packed) + packed)

    def _entry(self, name, tag, payload):
        v = self._varints  # Lengths are small: table lookups, not _varint().
        feature = tag + v[len(payload)] + payload
        entry = self._keys[name] + b"\x12" + v[len(feature)] + feature
        return b"\x0a" + self._len(entry) + entry

    def _len(self, data):
        """Varint of len(data)."""
        n = len(data)
        return self._varints[n] if n < len(self._varints) else _varint(n)

    def _input_mask(self, n):
        """The input_mask entry for n real tokens (one per length, cached)."""
        entry = self._mask_cache.get(n)
        if entry is None:
            entry = self._int64_feature("input_mask", [1] * n, self.max_seq_length, True)
            self._mask_cache[n] = entry
        return entry

    def encode(self, instance):
        """Instance -> serialized tf.train.Example bytes."""
        n = len(instance.tokens)
        if n > self.max_seq_length:
            raise ValueError(f"Instance of length {n} > max_seq_length {self.max_seq_length}.")
        parts = [
            self._int64_feature("input_ids", instance.tokens, self.max_seq_length),
            self._input_mask(n),
            self._int64_feature("segment_ids", instance.segment_ids, self.max_seq_length, True),
        ]
        if "masked_lm_positions" in self.names:
            p = len(instance.masked_positions)
            parts.append(self._int64_feature(
                "masked_lm_positions", instance.masked_positions, self.max_predictions,
                self._small_positions))
            parts.append(self._int64_feature("masked_lm_ids", instance.masked_ids, self.max_predictions))
            weights = b"\x00\x00\x80\x3f" * p + b"\x00\x00\x00\x00" * (self.max_predictions - p)
            parts.append(self._entry("masked_lm_weights", b"\x12", b"\x0a" + self._len(weights) + weights))
        if "next_sentence_labels" in self.names:
            parts.append(self._int64_feature("next_sentence_labels", [int(instance.label)], 1, True))
        features = b"".join(parts)
        return b"\x0a" + self._len(features) + features
