"""SQuAD-style question answering examples -> windowed model features.

As the original BERT run_squad.py: `[CLS] question [SEP] context window
[SEP]`, the question cut to max_query_length pieces, the context split into
windows of up to sequence_length - len(question) - 3 pieces that start
doc_stride pieces apart. The special tokens follow the tokenizer's
`kerasbert.text.SegmentLayout` (RoBERTa: `<s> question </s></s> context
</s>`, so windows hold one piece less and type ids are all 0); the
in-graph serving (`kerasbert.serving.qa_serving`) uses the same layout.
Unlike run_squad.py, pieces map to CHARACTERS of the original
context (`tokenize_with_offsets`), so an answer inside a
whitespace-separated word ("1990" in "(1990s)") keeps exact boundaries and a
predicted span decodes to the original text, case and accents included.
"""

import logging

import numpy as np

from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.data.finetuning.examples import TaskDataError
from kerasbert.data.finetuning.features import TaskFeatures, tokenize_lists, tokenize_with_offsets_lists
from kerasbert.text import segment_layout

logger = logging.getLogger(__name__)

BAD_ANSWER_POLICIES = ("error", "skip")
# One window's rows, in the order _window_rows returns them.
ROW_NAMES = ("ids", "types", "mask", "start_char", "end_char", "max_ctx")


def _answer_matches(context, start, text):
    if start < 0 or start > len(context):
        return False
    found = context[start:start + len(text)]
    if found == text:
        return True
    # Whitespace may differ (runs of spaces, newlines); compare collapsed.
    squeezed = " ".join(text.split())
    window = " ".join(context[start:start + len(text) + 32].split())
    return bool(squeezed) and window.startswith(squeezed)


def _answer_end(context, start, text):
    """Exclusive end char of `text` at `start`, whitespace-tolerant."""
    if context[start:start + len(text)] == text:
        return start + len(text)
    want = len("".join(text.split()))
    seen, i = 0, start
    while i < len(context) and seen < want:
        if not context[i].isspace():
            seen += 1
        i += 1
    return i


def _doc_spans(num_tokens, max_tokens, doc_stride):
    spans, start = [], 0
    while True:
        length = min(num_tokens - start, max_tokens)
        spans.append((start, length))
        if start + length >= num_tokens:
            return spans
        start += min(length, doc_stride)


def _max_context(spans):
    """For each span, a bool array: is the span the token's max context
    (BERT `_check_is_max_context`: score = min(left, right) + 0.01 * length)."""
    best = {}
    for s, (start, length) in enumerate(spans):
        for pos in range(start, start + length):
            score = min(pos - start, start + length - 1 - pos) + 0.01 * length
            if pos not in best or score > best[pos][0]:
                best[pos] = (score, s)
    return [
        np.asarray([best[pos][1] == s for pos in range(start, start + length)], np.int32)
        for s, (start, length) in enumerate(spans)
    ]


def _check_options(data, tokenizer, sequence_length, doc_stride, max_query_length, on_bad_answer):
    """Refuses a call convert_qa cannot serve; returns (T, the tokenizer's
    SegmentLayout)."""
    if task_format(data.task_type).example != "squad":
        raise TaskDataError(f"convert_qa got a {data.task_type} task.")
    if on_bad_answer not in BAD_ANSWER_POLICIES:
        raise TaskDataError(f"on_bad_answer must be one of {BAD_ANSWER_POLICIES}, got {on_bad_answer!r}.")
    if not data.examples:
        raise TaskDataError(f"{data.name} {data.split}: no examples to convert.")
    t = int(sequence_length)
    layout = segment_layout(tokenizer)
    if doc_stride < 1 or max_query_length < 1:
        raise TaskDataError(f"doc_stride and max_query_length must be positive, got {doc_stride}, {max_query_length}.")
    # Room for at least one context piece after the longest question.
    shortest = max_query_length + layout.special_tokens() + 1
    if t < shortest:
        raise TaskDataError(
            f"max_seq_length {t} leaves no room for the context after a question of up to "
            f"{max_query_length} pieces; use at least {shortest} (or a smaller max_query_length)."
        )
    return t, layout


def _window_rows(query, doc, span, max_ctx, t, layout):
    """One window `[CLS] query [SEP] doc[start:start + length] [SEP]` as
    six int32 [T] rows: ids, types, mask, start_char, end_char, is_max
    (the last three -1 / 0 off the context)."""
    doc_ids, doc_start, doc_end = doc
    start, length = span
    offset = layout.second_offset(len(query))
    ids = np.full(t, layout.pad_id, np.int32)
    ids[:offset] = layout.first_part(query)
    ids[offset:offset + length] = doc_ids[start:start + length]
    ids[offset + length] = layout.sep_id
    types = np.zeros(t, np.int32)
    types[offset:offset + length + 1] = layout.second_type_id
    mask = np.zeros(t, np.int32)
    mask[:offset + length + 1] = 1
    start_char = np.full(t, -1, np.int32)
    end_char = np.full(t, -1, np.int32)
    start_char[offset:offset + length] = doc_start[start:start + length]
    end_char[offset:offset + length] = doc_end[start:start + length]
    is_max = np.zeros(t, np.int32)
    is_max[offset:offset + length] = max_ctx
    return ids, types, mask, start_char, end_char, is_max


def _example_windows(query, doc, answer_tokens, t, layout, doc_stride):
    """Yields (six rows, answer positions) per context window of one example.
    The positions index the window sequence: (0, 0) without an answer to
    place, None when the answer lies outside this window (trained as 0, 0)."""
    offset = layout.second_offset(len(query))
    max_doc = t - offset - 1  # the final separator
    spans = _doc_spans(len(doc[0]), max_doc, doc_stride)
    for (start, length), max_ctx in zip(spans, _max_context(spans)):
        positions = (0, 0)
        if answer_tokens is not None:
            first, last = answer_tokens
            inside = first >= start and last < start + length
            positions = (first - start + offset, last - start + offset) if inside else None
        yield _window_rows(query, doc, (start, length), max_ctx, t, layout), positions


def _checked_answer(example, doc, name, is_training, on_bad_answer):
    """(first, last) context piece of the example's answer, None when there
    is none to place, or "skip" for a bad answer under on_bad_answer="skip"."""
    if not (is_training and not example.get("is_impossible") and example.get("answers")):
        return None
    answer_tokens = _answer_tokens(example, doc[1], doc[2], name)
    if not isinstance(answer_tokens, str):
        return answer_tokens
    if on_bad_answer == "error":
        raise TaskDataError(answer_tokens)
    logger.warning("Skipping: %s", answer_tokens)
    return "skip"


def convert_qa(data, tokenizer, sequence_length=384, doc_stride=128, max_query_length=64,
               is_training=True, on_bad_answer="error"):
    """SQuAD examples -> features, one per context window.

    Args:
        data: `TaskData` of task type qa.
        tokenizer: a `kerasbert.text` tokenizer; its `segment_layout`
            places the special tokens.
        is_training: compute start/end positions from the first answer
            (and check it). Evaluation features need no positions (the
            metric compares decoded text with every gold answer); positions
            are then 0.
        on_bad_answer: "error" (default): an answer whose text is not at its
            answer_start in the context raises an error naming the question
            id; "skip": such examples are left out (counted in
            stats["skipped_examples"], a warning).

    Returns:
        `TaskFeatures`: x int32 [N, T]; y {"start_positions",
        "end_positions"} int32 [N] (index in the window sequence; 0 =
        [CLS] for impossible questions and windows without the answer),
        None when not is_training; extras: example_index int32 [N],
        token_start_char / token_end_char int32 [N, T] (-1 off context),
        token_is_max_context int32 [N, T].
    """
    t, layout = _check_options(data, tokenizer, sequence_length, doc_stride, max_query_length,
                               on_bad_answer)
    examples = data.examples
    questions = tokenize_lists(tokenizer, [e["question"] for e in examples])
    contexts = list(dict.fromkeys(e["context"] for e in examples))
    context_index = {c: i for i, c in enumerate(contexts)}
    tokenized = tokenize_with_offsets_lists(tokenizer, contexts)

    rows = {k: [] for k in ROW_NAMES}
    example_index, positions = [], []
    skipped = 0
    for e, example in enumerate(examples):
        doc = tokenized[context_index[example["context"]]]
        answer_tokens = _checked_answer(example, doc, data.name or "qa", is_training,
                                        on_bad_answer)
        if answer_tokens == "skip":
            skipped += 1
            continue
        query = questions[e][:max_query_length]
        for values, window_positions in _example_windows(query, doc, answer_tokens, t, layout,
                                                         doc_stride):
            for key, value in zip(rows, values):
                rows[key].append(value)
            example_index.append(e)
            positions.append(window_positions)
    if skipped:
        logger.warning("%s: skipped %d example(s) whose answer is not in the context.", data.name, skipped)
    if not example_index:
        raise TaskDataError(f"{data.name} {data.split}: no features (every example skipped).")
    stats = {
        "num_examples": len(examples), "num_features": len(example_index),
        "skipped_examples": skipped, "windows_without_answer": positions.count(None),
        "max_seq_length": t, "doc_stride": doc_stride, "max_query_length": max_query_length,
    }
    return _features(rows, example_index, positions, is_training, t, stats)


def _features(rows, example_index, positions, is_training, t, stats):
    """The collected windows as `TaskFeatures` (convert_qa's Returns)."""
    def stack(key):
        return np.stack(rows[key]).astype(np.int32)

    x = {"input_word_ids": stack("ids"), "input_mask": stack("mask"), "input_type_ids": stack("types")}
    y = None
    if is_training:
        starts, ends = zip(*(p or (0, 0) for p in positions))
        y = {"start_positions": np.asarray(starts, np.int32), "end_positions": np.asarray(ends, np.int32)}
    extras = {
        "example_index": np.asarray(example_index, np.int32),
        "token_start_char": stack("start_char"),
        "token_end_char": stack("end_char"),
        "token_is_max_context": stack("max_ctx"),
    }
    return TaskFeatures("qa", x, y, None, extras, None, t, stats)


def _answer_tokens(example, doc_start, doc_end, name):
    """(first, last) context piece of the first answer, or an error message."""
    answer = example["answers"][0]
    context, text, start = example["context"], answer["text"], int(answer["answer_start"])
    if not _answer_matches(context, start, text):
        found = context[max(start, 0):max(start, 0) + len(text)]
        return (
            f"{name} question id {example['id']!r}: answer text {text!r} not found at "
            f"answer_start {start} in its context (the context has {found!r} there)."
        )
    end = _answer_end(context, start, text)
    inside = np.nonzero((doc_end > start) & (doc_start < end))[0]
    if not len(inside):
        return (
            f"{name} question id {example['id']!r}: answer text {text!r} at {start} covers no "
            "token of the context (only whitespace or dropped characters)."
        )
    return int(inside[0]), int(inside[-1])


def decode_span(context, token_start_char, token_end_char, start, end):
    """The original context text of the pieces start..end (inclusive) of one
    feature, with its character span: (text, start_char, end_char).
    ("", -1, -1) when the span is not inside the context (e.g. [CLS])."""
    if end < start or start < 0 or end >= len(token_start_char):
        return "", -1, -1
    first, last = int(token_start_char[start]), int(token_end_char[end])
    if first < 0 or last < 0:
        return "", -1, -1
    return context[first:last], first, last
