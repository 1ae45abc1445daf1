"""Tiny backbones and synthetic, learnable fine-tuning data for the task
tests. Token ids: 0 [PAD], 1 [CLS], 2 [SEP], 3.. ordinary tokens."""

import numpy as np

from kerasbert.models import BertBackbone

PAD, CLS, SEP = 0, 1, 2
VOCAB = 100


def tiny_backbone(sequence_length=32, hidden_dim=64, num_layers=2, dropout=0.0, **kwargs):
    return BertBackbone(
        vocabulary_size=VOCAB,
        num_layers=num_layers,
        num_heads=2,
        hidden_dim=hidden_dim,
        intermediate_dim=2 * hidden_dim,
        max_sequence_length=sequence_length,
        dropout=dropout,
        **kwargs,
    )


def micro_backbone(**kwargs):
    """For wiring tests (shapes, saving, precision): as small as it gets."""
    return BertBackbone(
        vocabulary_size=VOCAB, num_layers=1, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=16, **kwargs,
    )


def pack(a, b=None, length=None):
    """[CLS] a [SEP] (b [SEP]) padded to `length`: the three int32 rows."""
    ids = [CLS] + list(a) + [SEP]
    types = [0] * len(ids)
    if b is not None:
        ids += list(b) + [SEP]
        types += [1] * (len(b) + 1)
    length = length or len(ids)
    assert len(ids) <= length, (len(ids), length)
    pad = length - len(ids)
    return (
        np.array(ids + [PAD] * pad, "int32"),
        np.array([1] * len(ids) + [0] * pad, "int32"),
        np.array(types + [0] * pad, "int32"),
    )


def stack(rows):
    ids, mask, types = (np.stack(x) for x in zip(*rows))
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def random_features(rng, batch, length, vocab=VOCAB):
    """Random packed rows with some padding, for wiring tests."""
    rows = []
    for i in range(batch):
        n = max(1, length - 2 - (i % 3) * 2)
        rows.append(pack(rng.randint(3, vocab, n), length=length))
    return stack(rows)


# --- learnable tasks ---------------------------------------------------------


def token_presence(rng, n, length=16, marker=3):
    """label 1 iff `marker` occurs in the text (half the rows)."""
    rows, labels = [], []
    for i in range(n):
        text = rng.randint(4, VOCAB, length - 2)
        label = i % 2
        if label:
            text[rng.randint(len(text))] = marker
        rows.append(pack(text, length=length))
        labels.append(label)
    return stack(rows), np.array(labels, "int32")


def shared_first_token(rng, n, half=7, first_vocab=(4, 12)):
    """Pairs: label 1 iff segments a and b start with the same token."""
    rows, labels = [], []
    for i in range(n):
        a = rng.randint(12, VOCAB, half)
        b = rng.randint(12, VOCAB, half)
        a[0] = rng.randint(*first_vocab)
        label = i % 2
        if label:
            b[0] = a[0]
        else:
            b[0] = rng.choice([t for t in range(*first_vocab) if t != a[0]])
        rows.append(pack(a, b))
        labels.append(label)
    return stack(rows), np.array(labels, "int32")


def token_fraction(rng, n, length=16, marker=3):
    """Regression: target = the fraction of text tokens equal to `marker`."""
    rows, targets = [], []
    body = length - 2
    for _ in range(n):
        text = rng.randint(4, VOCAB, body)
        count = rng.randint(0, body // 2 + 1)
        text[rng.choice(body, count, replace=False)] = marker
        rows.append(pack(text, length=length))
        targets.append(count / body)
    return stack(rows), np.array(targets, "float32")


# Tagging: words are 1 or 2 tokens (a second piece from CONTINUATION). A word
# whose first token is in ENTITY is an entity: B-PER if the sentence holds
# the TRIGGER token anywhere, B-LOC if not (so the tag needs the context).
TAGS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
O_TAG, B_PER, B_LOC = 0, 1, 3
TRIGGER = 4
ENTITY = range(10, 20)
WORD_STARTS = range(20, 90)
CONTINUATION = range(90, VOCAB)


def rule_tagged(rng, n, words=10, length=32, entity_rate=0.3):
    """(features, token labels [n, T], sample weights [n, T], word_ids,
    word tags per row)."""
    rows, labels, word_id_rows, word_labels = [], [], [], []
    for i in range(n):
        triggered = i % 2 == 1
        trigger_at = rng.randint(words) if triggered else -1
        tokens, token_labels, word_ids, tags = [], [], [], []
        for w in range(words):
            if w == trigger_at:
                pieces, tag = [TRIGGER], O_TAG
            else:
                entity = rng.rand() < entity_rate
                first = rng.choice(ENTITY if entity else WORD_STARTS)
                tag = (B_PER if triggered else B_LOC) if entity else O_TAG
                pieces = [first] + ([rng.choice(CONTINUATION)] if rng.rand() < 0.4 else [])
            tokens += pieces
            token_labels += [tag] + [O_TAG] * (len(pieces) - 1)
            word_ids += [w] * len(pieces)
            tags.append(tag)
        ids, mask, types = pack(tokens, length=length)
        pad = length - len(tokens) - 1
        rows.append((ids, mask, types))
        labels.append([O_TAG] + token_labels + [O_TAG] * pad)
        word_id_rows.append([-1] + word_ids + [-1] * pad)
        word_labels.append([TAGS[t] for t in tags])
    word_ids = np.array(word_id_rows, "int32")
    from kerasbert.tasks.token_classifier import first_subtoken_weights

    return (stack(rows), np.array(labels, "int32"), first_subtoken_weights(word_ids),
            word_ids, word_labels)


def entity_spans(tags):
    """{(type, start, end)} of the BIO entities in a list of tag names (an
    I- that does not continue its type starts a new entity, as seqeval)."""
    spans, current = set(), None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, kind = tag.partition("-")
        if current and not (prefix == "I" and kind == current[0]):
            spans.add((current[0], current[1], i))
            current = None
        if prefix == "B" or (prefix == "I" and current is None):
            current = (kind, i)
    return spans


def entity_f1(gold_rows, predicted_rows):
    """Micro entity F1 (exact type and span), as seqeval computes it."""
    tp = fp = fn = 0
    for gold, pred in zip(gold_rows, predicted_rows):
        g, p = entity_spans(gold), entity_spans(pred)
        tp += len(g & p)
        fp += len(p - g)
        fn += len(g - p)
    return 2 * tp / max(2 * tp + fp + fn, 1)


# QA span copy: [CLS] q [SEP] context [SEP]. The answer starts where q occurs
# in the context and is 1 + q % 3 tokens long; its last token (for lengths 2
# and 3) is an end piece (90..99) and its middle one a middle piece (80..89),
# pieces that occur nowhere else, like the "##" pieces that close a word.
# No-answer questions: q is absent from the context (with distractor=True
# the context still holds an unmatched span with its pieces; a tiny model
# then needs many more steps, so the learning test leaves it out).
MIDDLE_PIECES = range(80, 90)
END_PIECES = range(90, VOCAB)


def span_copy(rng, n, context_len=8, no_answer_rate=0.25, vocab=(10, 40),
              distractor=False):
    """(features, labels dict, contexts, offsets [n, T, 2], gold texts)."""
    length = context_len + 4
    tokens = np.arange(*vocab)
    rows, starts, ends, contexts, offsets, golds = [], [], [], [], [], []
    for _ in range(n):
        question = rng.choice(tokens)
        size = 1 + question % 3
        context = rng.choice(np.setdiff1d(tokens, [question]), context_len, replace=False)
        p = rng.randint(context_len - size + 1)
        answerable = rng.rand() >= no_answer_rate
        if answerable:
            context[p] = question
        if size >= 2 and (answerable or distractor):
            context[p + size - 1] = rng.choice(END_PIECES)
        if size == 3 and (answerable or distractor):
            context[p + 1] = rng.choice(MIDDLE_PIECES)
        rows.append(pack([question], context, length=length))
        words = [f"w{t}" for t in context]
        text = " ".join(words)
        token_offsets = np.full((length, 2), -1, "int64")
        char = 0
        for i, word in enumerate(words):
            token_offsets[3 + i] = (char, char + len(word))
            char += len(word) + 1
        contexts.append(text)
        offsets.append(token_offsets)
        if answerable:
            first, last = 3 + p, 3 + p + size - 1
            starts.append(first)
            ends.append(last)
            golds.append(text[token_offsets[first, 0]:token_offsets[last, 1]])
        else:
            starts.append(0)
            ends.append(0)
            golds.append("")
    labels = {"start_positions": np.array(starts, "int32"),
              "end_positions": np.array(ends, "int32")}
    return stack(rows), labels, contexts, np.stack(offsets), golds


def choose_overlap(rng, n, num_choices=4, context_len=1, choice_len=1, vocab=(10, 16),
                   copies=1):
    """Multiple choice: the right choice repeats `copies` tokens of the
    context; the others share none. (Detecting a repeated token through
    [CLS] is slow to learn for a tiny model: the defaults keep it to one
    context token, one choice token and 6 token ids.)"""
    length = context_len + choice_len + 3
    tokens = np.arange(*vocab)
    features = {k: np.zeros((n, num_choices, length), "int32")
                for k in ("input_word_ids", "input_mask", "input_type_ids")}
    labels = rng.randint(num_choices, size=n).astype("int32")
    for i in range(n):
        context = rng.choice(tokens, context_len, replace=False)
        others = np.setdiff1d(tokens, context)
        for c in range(num_choices):
            choice = rng.choice(others, choice_len, replace=False)
            if c == labels[i]:
                where = rng.choice(choice_len, copies, replace=False)
                choice[where] = rng.choice(context, copies, replace=False)
            row = pack(context, choice, length=length)
            for k, v in zip(("input_word_ids", "input_mask", "input_type_ids"), row):
                features[k][i, c] = v
    return features, labels


def marker_in_segment_b(rng, n, marker=3, max_len=7):
    """Pairs: label 1 iff `marker` occurs in segment b. Half the rows also
    carry it in segment a (a distractor), and segment lengths vary, so the
    model must tell the segments apart (input_type_ids / [SEP])."""
    rows, labels = [], []
    for i in range(n):
        a = rng.randint(4, VOCAB, rng.randint(3, max_len + 1))
        b = rng.randint(4, VOCAB, rng.randint(3, max_len + 1))
        label = i % 2
        if label:
            b[rng.randint(len(b))] = marker
        if rng.rand() < 0.5:
            a[rng.randint(len(a))] = marker
        rows.append(pack(a, b, length=2 * max_len + 3))
        labels.append(label)
    return stack(rows), np.array(labels, "int32")
