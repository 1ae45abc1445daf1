"""`QuestionAnsweringServing`: the in-graph QA pipeline against the Python
one (`convert_qa` + `model.predict` + `decode_answers`), and hostile inputs.

One SavedModel (version 2) is saved and run in a fresh process that imports
only tensorflow and tensorflow_text; version 1 and the hostile inputs run
in-process on the traced signature (the same graph)."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from serving_fixtures import make_finetuned_dir
from serving_fixtures import run_fresh

SEQ_LENGTH, DOC_STRIDE, MAX_QUERY, MAX_ANSWER = 32, 8, 8, 6
CONTEXT = (
    "John Smith lives in Paris, the capital of France. Mary works at the bank near the "
    "river in London. The quick brown fox jumps over the lazy dog."
)
PAIRS = [
    ("who lives in paris?", CONTEXT),
    ("what?", "Naïve café — the old tower in Tokyo is big and red; the small blue cat runs fast."),
    ("", "the city of berlin is in germany and the river is slow"),
    ("where is the answer to this very long question that goes on and on", "a short context"),
    ("question", ""),
    ("which dog", " ".join(["the lazy dog runs fast near the old river"] * 12)),
    ("Who works at the bank?", "Mary  works\tat the BANK (1990s) near the river, Mary said."),
]
HOSTILE = [
    ("", ""),
    ("   \t\n ", "   \t\n "),
    ("where?", ""),
    ("", "the dog runs"),
    ("who?", ("The quick brown fox jumps over the lazy dog. " * 2223)[:100_000]),
    (b"bad \xff\xfe utf-8 \xc3(", b"the \xff dog \xc3( runs \xe2\x82 fast"),
    ("\x00\x07ctrl\u200b?", "\x00\x07ctrl\u200b\u200c\u200dzero\ufeffwidth dog"),
    ("東京タワー 😀?", "emoji 😀🎉 and CJK 東京タワー 한국어 the dog"),
    ("x" * 5000, "y" * 5000),
]
OUTPUTS = {
    "answer": tf.string, "start_char": tf.int32, "end_char": tf.int32, "score": tf.float32,
    "no_answer": tf.bool, "null_score": tf.float32, "score_diff": tf.float32,
    "num_windows": tf.int32,
}

# `import tensorflow` (2.20) itself imports part of keras, so the check is
# on what loading and running the SavedModel adds, and on kerasbert at all.
FRESH_SCRIPT = """
before = set(sys.modules)
model = tf.saved_model.load(sys.argv[1])
serve = model.signatures["serving_default"]
pairs = json.loads(sys.argv[2])
out = serve(question=tf.constant([q for q, _ in pairs]), context=tf.constant([c for _, c in pairs]))
ours = ("kerasbert", "keras", "keras_hub", "keras_nlp", "tf_keras")
added = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in ours)
assert not added and not any(m.split(".")[0] == "kerasbert" for m in sys.modules), added[:5]
result = {k: v.numpy().tolist() for k, v in out.items()}
result["answer"] = [a.decode("utf-8") for a in result["answer"]]
print(json.dumps(result))
"""


def _python_pipeline(model, tokenizer, pairs, **options):
    """The evaluation pipeline of fine-tuning: a list of `SpanPrediction`."""
    from kerasbert.data.finetuning.examples import TaskData
    from kerasbert.data.finetuning.qa import convert_qa
    from kerasbert.preprocessing.qa_decoding import decode_answers

    examples = [{"id": str(i), "question": q, "context": c} for i, (q, c) in enumerate(pairs)]
    features = convert_qa(TaskData(examples, "qa"), tokenizer, SEQ_LENGTH, DOC_STRIDE, MAX_QUERY,
                          is_training=False)
    logits = model.predict(features.x, verbose=0)
    extras = features.extras
    offsets = np.stack([extras["token_start_char"], extras["token_end_char"]], -1)
    predictions = decode_answers(
        [c for _, c in pairs], logits["start_logits"], logits["end_logits"], offsets,
        extras["example_index"], token_is_max_context=extras["token_is_max_context"],
        max_answer_length=MAX_ANSWER, **options,
    )
    return predictions, features


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    import keras

    from kerasbert.serving.qa_serving import QuestionAnsweringServing
    from kerasbert.tasks import QuestionAnswerer  # noqa: F401  (registers it for loading)
    from kerasbert.text import WordPieceTokenizer

    root = tmp_path_factory.mktemp("qa_serving")
    ft = make_finetuned_dir(str(root / "ft"), "qa", sequence_length=SEQ_LENGTH)
    model = keras.saving.load_model(os.path.join(ft, "model.keras"))
    tokenizer = WordPieceTokenizer(os.path.join(ft, "vocab.txt"))

    def module(**options):
        return QuestionAnsweringServing(model, tokenizer, SEQ_LENGTH, doc_stride=DOC_STRIDE,
                                        max_query_length=MAX_QUERY,
                                        max_answer_length=MAX_ANSWER, **options)

    v1_expected, features = _python_pipeline(model, tokenizer, PAIRS,
                                             version_2_with_negative=False)
    # A v2 threshold between the examples' score differences, so some are
    # answered and some are not: in the middle of the widest of the gaps
    # around the median, so that every no-answer decision is clear of
    # float noise.
    diffs = sorted(p.score_diff for p in v1_expected if np.isfinite(p.score_diff))
    middle = range(max(0, len(diffs) // 2 - 2), len(diffs) // 2 + 1)
    gap = max(middle, key=lambda i: diffs[i + 1] - diffs[i])
    threshold = float((diffs[gap] + diffs[gap + 1]) / 2)
    assert diffs[gap + 1] - diffs[gap] > 1e-2, diffs
    v2_expected, _ = _python_pipeline(model, tokenizer, PAIRS, version_2_with_negative=True,
                                      null_score_diff_threshold=threshold)
    v1 = module(windows_per_call=5)  # several model calls, chunks splitting examples
    v2 = module(version_2=True, null_score_diff_threshold=threshold)
    path = str(root / "qa_v2")
    tf.saved_model.save(v2, path, signatures=v2.signatures())
    return {
        "v1": v1, "v1_serve": v1.signatures()["serving_default"], "v1_expected": v1_expected,
        "v2_path": path, "v2_expected": v2_expected, "features": features, "threshold": threshold,
        "tokenizer": tokenizer,
    }


def _call(serve, pairs):
    out = serve(question=tf.constant([q for q, _ in pairs], tf.string),
                context=tf.constant([c for _, c in pairs], tf.string))
    result = {k: v.numpy() for k, v in out.items()}
    result["answer"] = [a.decode("utf-8") for a in result["answer"]]
    return result


SCORE_RTOL, SCORE_ATOL = 1e-6, 1e-5


def _score_tolerance(score):
    return SCORE_ATOL + SCORE_RTOL * abs(score)


def _check_parity(out, expected, version_2, threshold=0.0):
    """Served outputs against the Python pipeline's `SpanPrediction`s.

    Scores agree within float tolerance. Decisions are compared only where
    they are clear: the served span is the expected one when the best span
    beats the runner-up by 10x the score tolerance (otherwise one of the
    near-best spans), and with SQuAD v2 the no-answer flag is the expected
    one when `score_diff` is that far from the threshold (otherwise either).
    Returns the number of examples whose span decision was clear."""
    from kerasbert.testing import assert_same_choice

    for name in ("score", "null_score", "score_diff"):
        want = np.array([getattr(p, name) for p in expected])
        got = np.asarray(out[name], np.float64)
        finite = np.isfinite(want)
        np.testing.assert_allclose(got[finite], want[finite], rtol=SCORE_RTOL, atol=SCORE_ATOL,
                                   err_msg=name)
        # Python's -inf / +inf for "no span" are float32's extremes here.
        assert np.all(np.abs(got[~finite]) == np.finfo(np.float32).max), name
    clear_spans = 0
    for i, p in enumerate(expected):
        start, end = int(out["start_char"][i]), int(out["end_char"][i])
        answer, no_answer = out["answer"][i], bool(out["no_answer"][i])
        if not p.nbest:  # no window had a valid span
            assert (start, end, answer, no_answer) == (-1, -1, "", version_2), i
            continue
        if version_2:
            tolerance = _score_tolerance(p.null_score) + _score_tolerance(p.score)
            if abs(p.score_diff - threshold) > 10 * tolerance:
                assert no_answer == (p.score_diff > threshold), (i, p.score_diff, threshold)
        else:
            assert not no_answer, i
        tolerance = _score_tolerance(p.nbest[0]["score"])
        scores = [c["score"] for c in p.nbest] + [-np.inf]
        clear_spans += scores[0] - scores[1] > 10 * tolerance
        if no_answer:
            assert (start, end, answer) == (-1, -1, ""), i
            continue
        candidates = {(c["start_char"], c["end_char"]): c["score"] for c in p.nbest}
        assert_same_choice(candidates, (start, end),
                           (p.nbest[0]["start_char"], p.nbest[0]["end_char"]),
                           tolerance=tolerance, err_msg=f"example {i}")
        texts = {(c["start_char"], c["end_char"]): c["text"] for c in p.nbest}
        assert answer == texts[(start, end)], i
    # Enough clear cases that the decisions are really compared.
    assert 2 * clear_spans >= sum(bool(p.nbest) for p in expected), clear_spans
    return clear_spans


def _compare_features(module, tokenizer, pairs, features):
    """The module's windows equal `convert_qa`'s: ids, mask, types, example
    index, character offsets and max-context flags."""
    contexts = tf.constant([c for _, c in pairs])
    questions = tokenizer.tokenize_ids(tf.constant([q for q, _ in pairs]))
    questions = questions[:, : module.max_query_length]
    got = module._features(questions, *tokenizer.tokenize_with_offsets(contexts))
    for name in ("input_word_ids", "input_mask", "input_type_ids"):
        np.testing.assert_array_equal(got[name], features.x[name], err_msg=name)
    extras = features.extras
    np.testing.assert_array_equal(got["example_index"], extras["example_index"])
    np.testing.assert_array_equal(got["start_char"], extras["token_start_char"])
    np.testing.assert_array_equal(got["end_char"], extras["token_end_char"])
    np.testing.assert_array_equal(got["is_max_context"], extras["token_is_max_context"] > 0)
    return got


def test_features_match_convert_qa(setup):
    _compare_features(setup["v1"], setup["tokenizer"], PAIRS, setup["features"])
    assert len(setup["features"]) > len(PAIRS) + 10  # several windows per long context


@pytest.mark.parametrize("sequence_length, doc_stride, max_query, words", [
    # Windows of 141 and 41 pieces, 139 apart: piece 140 scores 0 + 0.01 * 141
    # in the first and 1 + 0.01 * 41 in the second, equal in exact arithmetic
    # but not in float64, where convert_qa gives it to the second window.
    (145, 139, 8, 180),
    (16, 3, 4, 40),
    (12, 1, 1, 25),
])
def test_windows_match_convert_qa_across_settings(setup, sequence_length, doc_stride, max_query,
                                                  words):
    from kerasbert.data.finetuning.examples import TaskData
    from kerasbert.data.finetuning.qa import convert_qa
    from kerasbert.serving.qa_serving import QuestionAnsweringServing

    pairs = [("who", " ".join(["dog"] * words)), ("the lazy dog runs", "a big red " * words),
             ("", "")]
    examples = [{"id": str(i), "question": q, "context": c} for i, (q, c) in enumerate(pairs)]
    tokenizer = setup["tokenizer"]
    features = convert_qa(TaskData(examples, "qa"), tokenizer, sequence_length, doc_stride, max_query,
                          is_training=False)
    # Only the windowing runs: the model is never called.
    module = QuestionAnsweringServing(setup["v1"].model, tokenizer, sequence_length,
                                      doc_stride=doc_stride, max_query_length=max_query)
    got = _compare_features(module, tokenizer, pairs, features)
    # Long contexts really were split: more windows than examples.
    assert got["input_word_ids"].shape[0] == len(features) > len(pairs)


def test_parity_version_1(setup):
    out = _call(setup["v1_serve"], PAIRS)
    _check_parity(out, setup["v1_expected"], version_2=False)
    assert [int(n) for n in out["num_windows"]] == [
        int(np.sum(setup["features"].extras["example_index"] == i)) for i in range(len(PAIRS))
    ]


def test_parity_version_2_fresh_process(setup):
    out = json.loads(run_fresh(FRESH_SCRIPT, setup["v2_path"], json.dumps(PAIRS)).splitlines()[-1])
    expected = setup["v2_expected"]
    assert any(p.start_char < 0 for p in expected[:4]) and any(p.start_char >= 0 for p in expected)
    _check_parity(out, expected, version_2=True, threshold=setup["threshold"])


def _check_well_formed(out, pairs):
    from kerasbert.serving.task_serving import clean_text

    size = len(pairs)
    for name, dtype in OUTPUTS.items():
        assert len(out[name]) == size, name
    for name in ("score", "null_score", "score_diff"):
        assert np.all(np.isfinite(out[name])), name
    assert np.all(out["num_windows"] >= 1)
    if not size:
        return
    contexts = [t.decode("utf-8") for t in clean_text(tf.constant([c for _, c in pairs])).numpy()]
    for i, context in enumerate(contexts):
        start, end = int(out["start_char"][i]), int(out["end_char"][i])
        if start < 0:
            assert end == -1 and out["answer"][i] == ""
        else:
            assert 0 <= start < end <= len(context)
            assert out["answer"][i] == context[start:end]


def test_hostile_inputs(setup):
    serve = setup["v1_serve"]
    empty = _call(serve, [])
    assert {k: v.dtype for k, v in serve.structured_outputs.items()} == OUTPUTS
    _check_well_formed(empty, [])
    out = _call(serve, HOSTILE)
    _check_well_formed(out, HOSTILE)
    assert out["num_windows"][4] > 100  # the 100,000-character context
    assert out["start_char"][0] == -1 and out["score"][0] == np.finfo(np.float32).min
    batch = [PAIRS[i % len(PAIRS)] for i in range(512)]
    _check_well_formed(_call(serve, batch), batch)


def test_warmup_requests_pass(setup):
    serve = setup["v1_serve"]
    requests = setup["v1"].warmup_requests()
    assert len(requests) >= 8
    for request in requests:
        pairs = list(zip(request["question"], request["context"]))
        _check_well_formed(_call(serve, pairs), pairs)


def test_a_context_past_the_cap_is_refused_naming_it(setup):
    """Issue 51: a request's cost grows with its context, so one context
    over `MAX_CONTEXT_BYTES` (1 MiB) is refused before any tokenizing."""
    from kerasbert.serving.qa_serving import MAX_CONTEXT_BYTES

    serve = setup["v1_serve"]
    huge = "word " * (MAX_CONTEXT_BYTES // 5 + 1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="QA context longer than 1,048,576"):
        _call(serve, [("what ?", "a short one"), ("what ?", huge)])
    _check_well_formed(_call(serve, [("what ?", "a short one")]), [("what ?", "a short one")])
