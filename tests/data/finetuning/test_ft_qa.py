"""SQuAD windows and character offsets: round trips on hand-made tricky data."""

import json

import numpy as np
import pytest

from ft_fixtures import tokenizer, write_jsonl, write_text
from kerasbert.data.finetuning import TaskDataError, convert_qa, decode_span, load_task

LONG_WORDS = "the cat sat on a mat . a dog ran to the river , who is the cat ?".split()
LONG = " ".join(LONG_WORDS * 3)


def _qa(qid, question, context, answer=None, start=None, impossible=False):
    if answer is not None and start is None:
        start = context.index(answer)
    answers = [] if answer is None else [{"text": answer, "answer_start": start}]
    qa = {"id": qid, "question": question, "answers": answers}
    if impossible:
        qa["is_impossible"] = True
    return {"context": context, "qas": [qa]}


def _squad_file(tmp_path):
    paragraphs = [
        _qa("accents", "where is the café?", "The Café de Flore is in Paris, France.", "Café de Flore"),
        _qa("inside-word", "when?", "It opened in the (1990s) era.", "1990"),
        _qa("punct", "what city?", "Capital: Paris!", "Paris!"),
        _qa("cjk", "首都?", "北京是中国的首都。", "中国"),
        _qa("korean", "영화?", "정말  재미있다 영화", "재미있다"),
        _qa("spaces", "where?", "Paris,\n  France is big", "Paris, France", start=0),
        _qa("impossible", "who?", "The cat sat.", impossible=True),
    ]
    # Every word of a long context is an answer once: answers at window edges.
    offset = 0
    for k, word in enumerate(LONG.split(" ")):
        start = LONG.index(word, offset)
        offset = start + len(word)
        paragraphs.append(_qa(f"long-{k}", "what is it?", LONG, word, start))
    data = {"version": "v2.0", "data": [{"title": "t", "paragraphs": paragraphs}]}
    return write_text(tmp_path / "squad.json", json.dumps(data, ensure_ascii=False))


@pytest.mark.parametrize("lower_case", [True, False])
def test_gold_spans_decode_to_the_answer_text(tmp_path, lower_case):
    data = load_task(f"squad_json:{_squad_file(tmp_path)}")
    assert data.task_type == "qa" and len(data) == 7 + len(LONG.split(" "))
    tok = tokenizer(tmp_path, lower_case=lower_case)
    features = convert_qa(data, tok, sequence_length=24, doc_stride=5, max_query_length=6)
    x, y, extras = features.x, features.y, features.extras
    assert features.stats["num_features"] > len(data)  # the long context needs windows
    found = set()
    for i in range(len(features)):
        example = data.examples[extras["example_index"][i]]
        s, e = int(y["start_positions"][i]), int(y["end_positions"][i])
        if example["is_impossible"]:
            assert (s, e) == (0, 0)
            continue
        if s == 0:
            continue
        text, first, last = decode_span(example["context"], extras["token_start_char"][i],
                                        extras["token_end_char"][i], s, e)
        assert " ".join(text.split()) == " ".join(example["answers"][0]["text"].split()), example["id"]
        assert first == example["answers"][0]["answer_start"]
        found.add(example["id"])
    # Every answerable question has its answer inside at least one window.
    assert found == {e["id"] for e in data.examples if not e["is_impossible"]}


def test_window_layout(tmp_path):
    tok = tokenizer(tmp_path)
    data = load_task(f"squad_json:{_squad_file(tmp_path)}")
    features = convert_qa(data, tok, sequence_length=24, doc_stride=5, max_query_length=2)
    x, extras = features.x, features.extras
    long_rows = np.nonzero(extras["example_index"] == 7)[0]
    assert len(long_rows) > 3
    question = tok.tokenize_ids("what is it?").numpy().tolist()[:2]
    covered = {}
    for row in long_rows:
        ids = x["input_word_ids"][row]
        assert ids[0] == tok.cls_id and ids[1:3].tolist() == question and ids[3] == tok.sep_id
        n = int(x["input_mask"][row].sum())
        assert ids[n - 1] == tok.sep_id and (ids[n:] == tok.pad_id).all()
        assert x["input_type_ids"][row][:4].tolist() == [0] * 4
        assert (x["input_type_ids"][row][4:n] == 1).all() and (x["input_type_ids"][row][n:] == 0).all()
        start_char = extras["token_start_char"][row]
        assert (start_char[:4] == -1).all() and (start_char[n - 1:] == -1).all()
        assert (start_char[4:n - 1] >= 0).all()
        assert n - 1 - 4 <= 24 - 2 - 3
        for pos in range(4, n - 1):
            covered.setdefault(int(start_char[pos]), []).append(int(extras["token_is_max_context"][row][pos]))
    ids_all, starts_all, _ = tok.tokenize_with_offsets(LONG)
    assert sorted(covered) == sorted(starts_all.numpy().tolist())
    assert all(sum(flags) == 1 for flags in covered.values())  # one max context per piece
    # Windows start doc_stride pieces apart.
    first = [int(extras["token_start_char"][row][4]) for row in long_rows]
    starts = starts_all.numpy().tolist()
    assert [starts.index(c) for c in first][:3] == [0, 5, 10]


def test_answer_not_found(tmp_path):
    context = "The cat sat on the mat."
    path = write_jsonl(tmp_path / "qa.jsonl", [
        {"id": "q1", "question": "who?", "context": context,
         "answers": [{"text": "cat", "answer_start": 4}]},
        {"id": "q2", "question": "what?", "context": context,
         "answers": [{"text": "dog", "answer_start": 4}]},
    ])
    data = load_task(f"jsonl:{path}")
    assert data.task_type == "qa"
    tok = tokenizer(tmp_path)
    with pytest.raises(TaskDataError, match=r"question id 'q2': answer text 'dog' not found at "
                       r"answer_start 4 in its context \(the context has 'cat' there\)"):
        convert_qa(data, tok, sequence_length=32, max_query_length=8)
    features = convert_qa(data, tok, sequence_length=32, max_query_length=8, on_bad_answer="skip")
    assert features.stats["skipped_examples"] == 1 and features.extras["example_index"].tolist() == [0]
    # Evaluation features need no answer positions.
    features = convert_qa(data, tok, sequence_length=32, max_query_length=8, is_training=False)
    assert features.y is None and len(features) == 2
    with pytest.raises(TaskDataError, match="max_seq_length 10 leaves no room"):
        convert_qa(data, tok, sequence_length=10, max_query_length=8)
    bad = write_text(tmp_path / "bad.json", '{"version": 1}')
    with pytest.raises(TaskDataError, match="not a SQuAD JSON file"):
        load_task(f"squad_json:{bad}")
