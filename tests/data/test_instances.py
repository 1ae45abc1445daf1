"""Statistics and structure of kerasbert.data.instances (pure functions),
each over >= 10,000 instances. Token ids encode (document, position), so
every test can tell where each token came from."""

import numpy as np
import pytest

from kerasbert.data import instances as il

SPECIALS = il.Specials(cls_id=101, sep_id=102, mask_id=103, pad_id=0, vocab_size=30522 * 10)
BASE = 1000  # id = BASE + doc * 1000 + position in doc


def make_documents(num_docs, seed=0, max_pieces=3, sentences=(4, 30), words=(2, 8)):
    """Tokenized documents: [doc][sentence][word] -> wordpiece ids."""
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(num_docs):
        pos, doc = 0, []
        for _ in range(rng.integers(*sentences)):
            sent = []
            for _ in range(rng.integers(*words)):
                n = int(rng.integers(1, max_pieces + 1))
                sent.append([BASE + d * 1000 + pos + k for k in range(n)])
                pos += n
            doc.append(sent)
        docs.append(doc)
    return docs


def doc_of(token):
    return (token - BASE) // 1000


def generate(docs, seed=0, window=20, **kw):
    options = il.InstanceOptions(**kw)
    prepared = [il.prepare_document(d) for d in docs]
    out = []
    for i, doc in enumerate(prepared):
        rng = np.random.default_rng([seed, 0, i])
        others = prepared[max(0, i - window):i] + prepared[i + 1:i + 1 + window]
        if options.objective == "none":
            continue
        out.extend(il.create_instances_from_document(doc, others, options, SPECIALS, rng))
    return out


@pytest.fixture(scope="module")
def nsp_masked():
    docs = make_documents(2000)
    insts = generate(docs, sequence_length=43, max_predictions_per_seq=43)
    assert len(insts) >= 10_000
    return insts


def test_chosen_fraction_and_80_10_10(nsp_masked):
    chosen = maskable = masked = kept = randomized = 0
    for inst in nsp_masked:
        n = sum(t not in (101, 102, 0) for t in inst.tokens)
        maskable += n
        chosen += len(inst.masked_positions)
        for pos, orig in zip(inst.masked_positions, inst.masked_ids):
            now = inst.tokens[pos]
            masked += now == SPECIALS.mask_id
            kept += now == orig
            randomized += now != orig and now != SPECIALS.mask_id
    assert abs(chosen / maskable - 0.15) < 0.005, chosen / maskable
    assert abs(masked / chosen - 0.8) < 0.02
    assert abs(kept / chosen - 0.1) < 0.02
    assert abs(randomized / chosen - 0.1) < 0.02


def test_special_tokens_never_masked(nsp_masked):
    for inst in nsp_masked:
        assert inst.tokens[0] == 101 and inst.tokens[-1] == 102
        for pos, orig in zip(inst.masked_positions, inst.masked_ids):
            assert orig not in (101, 102, 0)
            assert 0 < pos < len(inst.tokens) - 1
        assert inst.masked_positions == sorted(set(inst.masked_positions))
        assert sum(t == 102 for t in inst.tokens) == 2


def labelled_pairs(num_docs, seed, **options):
    """Unmasked instances of length 43 from `num_docs` documents: at least
    10,000, half of them labelled 1; (instance, index of the first [SEP],
    segment A's tokens, segment B's tokens) for each."""
    insts = generate(make_documents(num_docs, seed=seed), seed=seed, sequence_length=43,
                     masking=False, **options)
    assert len(insts) >= 10_000
    labels = np.array([i.label for i in insts])
    assert abs(labels.mean() - 0.5) < 0.03, labels.mean()
    return [(inst, sep, inst.tokens[1:sep], inst.tokens[sep + 1:-1])
            for inst in insts for sep in [inst.tokens.index(102)]]


def test_nsp_labels_half_random_and_b_really_random():
    for inst, sep, a, b in labelled_pairs(2000, seed=1):
        assert len(set(map(doc_of, a))) == 1
        same_doc = doc_of(a[0]) == doc_of(b[0])
        assert same_doc == (inst.label == 0)
        if inst.label == 0:
            assert max(a) < min(b)  # B really follows A.
        assert len(inst.tokens) <= 43
        assert inst.segment_ids == [0] * (sep + 1) + [1] * (len(b) + 1)


def test_sop_swaps_half_and_swaps_really_swap():
    for inst, _, a, b in labelled_pairs(2500, seed=2, objective="sop"):
        assert doc_of(a[0]) == doc_of(b[0])  # SOP never mixes documents.
        if inst.label == 1:
            assert min(a) > max(b)
        else:
            assert max(a) < min(b)


def test_short_sequence_fraction():
    docs = make_documents(4000, seed=3, sentences=(3, 8))
    options = il.InstanceOptions(sequence_length=43, short_seq_prob=0.1, masking=False)
    short = total = 0
    for i, doc in enumerate(docs):
        insts = il.create_instances_from_document(
            doc, docs[i + 1:i + 3], options, SPECIALS, np.random.default_rng([3, 0, i]))
        if insts:
            total += 1
            short += insts[0].target_length < 40
            for inst in insts:
                assert 2 <= inst.target_length <= 40
    # P(short target) = 0.1 * (1 - 1/39): randint(2, 40) can draw 40.
    assert abs(short / total - 0.1 * 38 / 39) < 0.015, short / total


def test_whole_word_masking_never_splits_a_word():
    docs = make_documents(2000, seed=4)
    insts = generate(docs, seed=4, sequence_length=43, max_predictions_per_seq=6,
                     whole_word_mask=True)
    assert len(insts) >= 10_000
    multi_piece_masked = 0
    for inst in insts:
        assert len(inst.masked_positions) <= 6
        words, cur = [], None
        for pos, start in enumerate(inst.word_starts):
            if start or cur is None:
                cur = [pos]
                words.append(cur)
            else:
                cur.append(pos)
        chosen = set(inst.masked_positions)
        for word in words:
            hit = chosen.intersection(word)
            assert not hit or len(hit) == len(word), (word, chosen)
            multi_piece_masked += bool(hit) and len(word) > 1
        # Word starts match the original words: a piece that is not a start
        # directly follows its predecessor (ids count positions).
        orig = list(inst.tokens)
        for pos, oid in zip(inst.masked_positions, inst.masked_ids):
            orig[pos] = oid
        for pos in range(2, len(orig) - 1):
            if not inst.word_starts[pos]:
                assert orig[pos] == orig[pos - 1] + 1
    assert multi_piece_masked > 1000


def test_full_sentences_pack_to_max_length():
    docs = make_documents(600, seed=5, sentences=(2, 6))
    options = il.InstanceOptions(sequence_length=64, objective="none")
    insts = []
    for c in range(0, len(docs), 64):
        insts += il.create_full_sentence_instances(
            docs[c:c + 64], options, SPECIALS, np.random.default_rng([5, 0, c]))
    lengths = np.array([len(i.tokens) for i in insts])
    assert lengths.max() <= 64
    assert np.mean(lengths) > 50  # Packed, not one sentence each.
    for inst in insts:
        assert inst.label is None and set(inst.segment_ids) == {0}
        assert inst.tokens[0] == 101 and inst.tokens[-1] == 102


def test_truncate_seq_pair_cuts_the_longer_side():
    rng = np.random.default_rng(0)
    a = (list(range(10)), [True] * 10)
    b = (list(range(100, 103)), [True] * 3)
    il.truncate_seq_pair(a, b, 8, rng)
    assert len(a[0]) == 5 and len(b[0]) == 3
    assert a[0] == list(range(a[0][0], a[0][0] + 5))


def test_lone_segment_without_other_documents_is_dropped():
    doc = [[[2000, 2001]]]  # One word: nothing to cut.
    out = il.create_instances_from_document(
        doc, [], il.InstanceOptions(sequence_length=16), SPECIALS, np.random.default_rng(0))
    assert out == []


def test_encoder_matches_tf_train_example():
    import tensorflow as tf

    from kerasbert.data import schema

    docs = make_documents(30, seed=6)
    insts = generate(docs, seed=6, sequence_length=43, max_predictions_per_seq=7)
    enc = il.ExampleEncoder(SPECIALS.vocab_size + 200_000, 43, 7, "nsp", True)
    for inst in insts[:50]:
        n, p = len(inst.tokens), len(inst.masked_positions)
        pad = lambda v, k: list(v) + [0] * (k - len(v))  # noqa: E731
        ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))  # noqa: E731
        ref = tf.train.Example(features=tf.train.Features(feature={
            "input_ids": ints(pad(inst.tokens, 43)),
            "input_mask": ints(pad([1] * n, 43)),
            "segment_ids": ints(pad(inst.segment_ids, 43)),
            "masked_lm_positions": ints(pad(inst.masked_positions, 7)),
            "masked_lm_ids": ints(pad(inst.masked_ids, 7)),
            "masked_lm_weights": tf.train.Feature(
                float_list=tf.train.FloatList(value=[1.0] * p + [0.0] * (7 - p))),
            "next_sentence_labels": ints([inst.label]),
        }))
        ours = tf.train.Example.FromString(enc.encode(inst))
        assert ours == ref
        spec = schema.parsing_spec(schema.feature_names(), 43, 7)
        parsed = tf.io.parse_single_example(enc.encode(inst), spec)
        assert parsed["input_ids"].numpy().tolist() == pad(inst.tokens, 43)


def _truncation_reference(la, lb, max_num_tokens):
    """The original loop: cut the longer side one token at a time (B on ties)."""
    cut_a = cut_b = 0
    while la + lb > max_num_tokens:
        if la > lb:
            la, cut_a = la - 1, cut_a + 1
        else:
            lb, cut_b = lb - 1, cut_b + 1
    return cut_a, cut_b


def test_truncation_cuts_match_the_original_loop():
    for la in range(1, 40):
        for lb in range(1, 40):
            for m in (2, 5, 17, 40):
                got = tuple(int(x) for x in il.truncation_cuts(la, lb, m))
                assert got == _truncation_reference(la, lb, m), (la, lb, m)
    la, lb = np.arange(1, 60), np.arange(59, 0, -1)
    cut_a, cut_b = il.truncation_cuts(la, lb, 25)
    assert [(int(a), int(b)) for a, b in zip(cut_a, cut_b)] == [
        _truncation_reference(a, b, 25) for a, b in zip(la.tolist(), lb.tolist())]


def test_truncation_front_cuts_are_half():
    # Which end a cut comes from: a fair coin per token (in aggregate).
    rng = np.random.default_rng(0)
    fronts = total = 0
    for _ in range(2000):
        a = (list(range(50)), [True] * 50)
        b = (list(range(100, 110)), [True] * 10)
        il.truncate_seq_pair(a, b, 30, rng)
        fronts += a[0][0]
        total += 30
    assert abs(fronts / total - 0.5) < 0.03


def test_batch_encoder_matches_single_instance_encoder():
    docs = make_documents(60, seed=7)
    chunk = il.TokenizedChunk.from_documents(docs)
    options = il.InstanceOptions(sequence_length=43, max_predictions_per_seq=7)
    enc = il.ExampleEncoder(SPECIALS.vocab_size + 200_000, 43, 7, "nsp", True)
    batches = list(il.chunk_batches(chunk, options, SPECIALS, np.random.default_rng(0), 2))
    assert len(batches) == 2
    for batch in batches:
        records = enc.encode_batch(batch)
        assert records == [enc.encode(inst) for inst in batch.to_instances()]
