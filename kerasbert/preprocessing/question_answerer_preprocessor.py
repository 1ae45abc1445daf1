"""Raw (question, context) pairs with SQuAD answers -> `QuestionAnswerer`
windows in `tf.data`, and the windows' logits -> answer spans in the
contexts."""

import math

import keras
import numpy as np
import tensorflow as tf

from kerasbert.data.finetuning.features import MODEL_INPUTS
from kerasbert.data.finetuning.padding import bucket_batches
# The answer checks of the CLI's converter, so both refuse the same answers.
from kerasbert.data.finetuning.qa import _answer_end
from kerasbert.data.finetuning.qa import _answer_matches
from kerasbert.errors import UsageError
from kerasbert.preprocessing.qa_decoding import decode_answers
from kerasbert.preprocessing.qa_windows import QAWindows
from kerasbert.preprocessing.qa_windows import answer_char_spans
from kerasbert.preprocessing.task_preprocessor import TaskPreprocessor
from kerasbert.preprocessing.task_preprocessor import clean_text
from kerasbert.preprocessing.task_preprocessor import has_strings
from kerasbert.preprocessing.task_preprocessor import is_text
from kerasbert.text import segment_layout

LABELS = ("start_positions", "end_positions")
#: What `postprocess` needs of every window besides its logits.
EXTRAS = ("example_index", "start_char", "end_char", "is_max_context")


def _as_text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _answers(answer, where):
    """One example's answers as SQuAD records: a {"text", "answer_start"}
    dict, a list of them, SQuAD's {"text": [...], "answer_start": [...]},
    or None / [] for a question without an answer."""
    if answer is None:
        return []
    if isinstance(answer, dict):
        texts, starts = answer.get("text"), answer.get("answer_start")
        if isinstance(texts, (list, tuple, np.ndarray)):
            return [{"text": _as_text(t), "answer_start": int(s)} for t, s in zip(texts, starts)]
        answer = [answer]
    if not isinstance(answer, (list, tuple)):
        raise UsageError(f"{where}: an answer is a dict {{'text': ..., 'answer_start': ...}} "
                         f"(or a list of them), got {type(answer).__name__}.")
    records = []
    for item in answer:
        if not isinstance(item, dict) or "text" not in item or "answer_start" not in item:
            raise UsageError(f"{where}: an answer is a dict {{'text': ..., 'answer_start': ...}}.")
        records.append({"text": _as_text(item["text"]), "answer_start": int(item["answer_start"])})
    return records


def _answer_span(context, answers, where):
    """(start, end) code points of the first answer, as `convert_qa` finds
    it; (-1, -1) for a question without an answer."""
    if not answers:
        return -1, -1
    text, start = answers[0]["text"], answers[0]["answer_start"]
    if not _answer_matches(context, start, text):
        found = context[max(start, 0):max(start, 0) + len(text)]
        raise UsageError(f"{where}: answer text {text!r} not found at answer_start {start} in "
                         f"its context (the context has {found!r} there).")
    return start, _answer_end(context, start, text)


def _first_answer(answers):
    """A dataset element's answers ({"text", "answer_start"}, each a scalar
    or a vector of answers) -> (text, answer_start) of the first; ("", -1)
    when there is none."""
    texts = tf.reshape(answers["text"], [-1])
    starts = tf.reshape(tf.cast(answers["answer_start"], tf.int64), [-1])
    has = tf.size(texts) > 0
    return (tf.where(has, tf.concat([texts, [""]], 0)[0], ""),
            tf.where(has, tf.concat([starts, [-1]], 0)[0], tf.constant(-1, tf.int64)))


@keras.saving.register_keras_serializable(package="kerasbert")
class QuestionAnswererPreprocessor(TaskPreprocessor):
    """Windows `[CLS] question [SEP] context window [SEP]` (RoBERTa: two
    separators), `doc_stride` pieces apart, as the CLI's converter
    (`kerasbert.data.finetuning.convert_qa`) and the exported graph cut
    them (`kerasbert.preprocessing.qa_windows`); start/end labels from the
    first answer's character span (0, [CLS], in the windows that do not
    hold it).

    Inputs: `(questions, contexts)` as lists or arrays of strings, or a
    `tf.data` dataset (batched or not) whose elements are `(question,
    context)`, `((question, context), answers)` or dicts with `question`,
    `context` and `answers` (as TFDS `squad` gives them). Labels: one SQuAD
    answer per question (`{"text": ..., "answer_start": ...}`, a list of
    them or SQuAD's `{"text": [...], "answer_start": [...]}`: the first
    counts; None or none for a question without an answer). `predict`
    returns one dict per question: `answer`, `start_char`, `end_char`
    (code points in the context, end exclusive; -1 for no answer), `score`,
    `null_score` (the [CLS] score), `score_diff` (null_score - score, what
    the SQuAD v2.0 threshold compares), `no_answer`.

    Tokenizing and windowing run in a parallel `tf.data` map over chunks of
    examples; one example becomes one or more windows (`unbatch`), so a
    batch holds `batch_size` windows, not questions. The windows of lists
    with answers are counted first (one tokenizing pass, once per `fit`),
    which sizes the epoch and the recipe's schedule; with `shuffle` they are
    cut once, kept in memory and shuffled every epoch by the seed, as the
    `--features` path shuffles its windows, so both train on the same
    batches. Lists without answers shuffle the examples (each keeps its
    windows together); a `tf.data` dataset is taken in its own order.

    Args:
        doc_stride, max_query_length: windowing (128, 64).
        max_answer_length: longest answer in pieces (30).
        null_score_diff_threshold: SQuAD v2.0 no-answer threshold (0.0).
        version_2_with_negative: answer "" when the null score wins; set by
            the first labelled lists that hold a question without an answer.

    Example:

    >>> import os, tempfile
    >>> from kerasbert.preprocessing import QuestionAnswererPreprocessor
    >>> from kerasbert.text import SPECIAL_TOKENS, WordPieceTokenizer, write_vocab
    >>> folder = tempfile.mkdtemp()
    >>> write_vocab([*SPECIAL_TOKENS, "the", "movie", "was", "good"], f"{folder}/vocab.txt")
    >>> tokenizer = WordPieceTokenizer(f"{folder}/vocab.txt")
    >>> reader = QuestionAnswererPreprocessor(tokenizer, sequence_length=16, doc_stride=4,
    ...                                       max_query_length=4)
    >>> answers = [{"text": "good", "answer_start": 14}]     # character offset in the context
    >>> x, y = next(iter(reader.dataset((["the movie ?"], ["the movie was good"]), answers)))
    >>> x["input_word_ids"].numpy().tolist()                 # [CLS] question [SEP] context [SEP]
    [[2, 5, 6, 1, 3, 5, 6, 7, 8, 3, 0, 0, 0, 0, 0, 0]]
    >>> int(y["start_positions"][0]), int(y["end_positions"][0])   # "good", in pieces
    (8, 8)
    """

    task_types = ("qa",)
    options = ("doc_stride", "max_query_length", "max_answer_length",
               "null_score_diff_threshold", "version_2_with_negative")

    def __init__(self, tokenizer=None, sequence_length=None, label_names=None, task_type=None,
                 doc_stride=128, max_query_length=64, max_answer_length=30,
                 null_score_diff_threshold=0.0, version_2_with_negative=False, **kwargs):
        super().__init__(tokenizer, sequence_length, None, task_type, **kwargs)
        self.doc_stride = int(doc_stride)
        self.max_query_length = int(max_query_length)
        self.max_answer_length = int(max_answer_length)
        self.null_score_diff_threshold = float(null_score_diff_threshold)
        self.version_2_with_negative = bool(version_2_with_negative)

    def qa_options(self):
        """The QA options an export records (`kerasbert.serving`)."""
        return {"doc_stride": self.doc_stride, "max_query_length": self.max_query_length,
                "max_answer_length": self.max_answer_length,
                "null_score_diff_threshold": self.null_score_diff_threshold,
                "version_2_with_negative": self.version_2_with_negative}

    @property
    def windower(self):
        """The `QAWindows` of the tokenizer's layout, T and the stride."""
        try:
            return QAWindows(segment_layout(self.tokenizer), self.sequence_length,
                             self.doc_stride, self.max_query_length)
        except ValueError as error:
            raise UsageError(str(error)) from None

    def inputs_of(self, data):
        return (([e["question"] for e in data.examples], [e["context"] for e in data.examples]),
                [[] if e.get("is_impossible") else e["answers"] for e in data.examples])

    def is_raw(self, x):
        if isinstance(x, tf.data.Dataset):
            return has_strings(x.element_spec)
        return isinstance(x, tuple) and len(x) == 2 and is_text(x[0])

    # --- examples -------------------------------------------------------------

    def _columns(self, x, y=None):
        """Python / NumPy (questions, contexts) and answers -> a dict of
        tensors [N] (question, context, index, answer_start / answer_end in
        code points, -1 without an answer), checking every answer."""
        if not (isinstance(x, tuple) and len(x) == 2):
            raise UsageError("QuestionAnswerer takes x=(questions, contexts).")
        questions, contexts = ([_as_text(v) for v in column] for column in x)
        if len(questions) != len(contexts):
            raise UsageError(f"{len(questions)} questions for {len(contexts)} contexts.")
        if not questions:
            raise UsageError("QuestionAnswerer got no questions.")
        columns = {"question": tf.constant(questions, tf.string),
                   "context": tf.constant(contexts, tf.string),
                   "index": tf.range(len(questions), dtype=tf.int64)}
        if y is not None:
            if len(y) != len(questions):
                raise UsageError(f"{len(y)} answers for {len(questions)} questions.")
            spans = np.asarray([_answer_span(c, _answers(a, f"answer {i}"), f"answer {i}")
                                for i, (c, a) in enumerate(zip(contexts, y))], np.int64)
            if (spans[:, 0] < 0).any():
                self.version_2_with_negative = True
            columns["answer_start"], columns["answer_end"] = spans[:, 0], spans[:, 1]
        return columns

    def _dataset_examples(self, dataset):
        """A dataset of (question, context), ((question, context), answers)
        or {question, context, answers} elements, batched or not -> one
        dict per example (question, context, index and, with answers,
        answer_text / answer_start of the first answer)."""
        spec = dataset.element_spec
        if isinstance(spec, dict):
            if not {"question", "context"} <= set(spec):
                raise UsageError("A QA dataset of dicts needs 'question' and 'context' "
                                 f"(and 'answers' to train); got {sorted(spec)}.")
            question_spec = spec["question"]

            def split(element):
                return ((element["question"], element["context"]), element.get("answers"))
        elif isinstance(spec, tuple) and len(spec) == 2 and all(
                isinstance(s, tf.TensorSpec) and s.dtype == tf.string for s in spec):
            question_spec = spec[0]

            def split(question, context):
                return (question, context), None
        elif isinstance(spec, tuple) and len(spec) in (2, 3) and isinstance(spec[0], tuple) \
                and len(spec[0]) == 2:
            if len(spec) == 3:
                raise UsageError("QuestionAnswerer takes no sample_weight with raw text.")
            question_spec = spec[0][0]

            def split(x, answers):
                return x, answers
        else:
            raise UsageError("A QA dataset's elements are (question, context), ((question, "
                             "context), answers) or dicts with question, context and answers; "
                             f"got {spec}.")
        if question_spec.shape.rank not in (0, 1):
            raise UsageError(f"A QA dataset's questions are strings or vectors of strings "
                             f"(batched); got shape {question_spec.shape}.")
        if question_spec.shape.rank == 1:
            dataset = dataset.unbatch()

        def example(*element):
            (question, context), answers = split(*element)
            out = {"question": question, "context": context}
            if answers is not None:
                if not isinstance(answers, dict) or not {"text", "answer_start"} <= set(answers):
                    raise UsageError("A QA dataset's answers are dicts with 'text' and "
                                     "'answer_start' (as in SQuAD).")
                out["answer_text"], out["answer_start"] = _first_answer(answers)
            return out

        dataset = dataset.map(example).enumerate()
        return dataset.map(lambda index, element: dict(element, index=index))

    # --- windows in tf.data ---------------------------------------------------

    def _window_chunk(self, labels, extras, texts):
        """The `tf.data` map over a chunk of examples: -> a dict of [W, ...]
        tensors (the model inputs, the labels, the decoding extras)."""
        windower, tokenizer = self.windower, self.tokenizer

        def window(chunk):
            contexts = clean_text(chunk["context"])
            question_ids, ids, starts, ends = windower.tokenize(tokenizer, chunk["question"],
                                                                contexts)
            windows = windower.windows(question_ids, ids, starts, ends)
            out = {name: windows[name] for name in MODEL_INPUTS}
            if labels:
                if "answer_end" in chunk:
                    answer_start, answer_end = chunk["answer_start"], chunk["answer_end"]
                else:
                    answer_start, answer_end = answer_char_spans(
                        contexts, clean_text(chunk["answer_text"]), chunk["answer_start"])
                out["start_positions"], out["end_positions"] = windower.answer_positions(
                    windows, starts, ends, answer_start, answer_end)
            if extras:
                example = windows["example_index"]
                out["example_index"] = tf.gather(chunk["index"], example)
                out["start_char"] = tf.cast(windows["start_char"], tf.int32)
                out["end_char"] = tf.cast(windows["end_char"], tf.int32)
                out["is_max_context"] = windows["is_max_context"]
                if texts:
                    out["context"] = tf.gather(contexts, example)
            return out

        return window

    def _windows(self, examples, batch_size, labels, extras=False, texts=False):
        """Examples -> chunks of windows (one dict of [W, ...] per chunk of
        `batch_size` examples), tokenized in a parallel map."""
        return examples.batch(batch_size).map(
            self._window_chunk(labels, extras, texts), num_parallel_calls=tf.data.AUTOTUNE)

    def count_windows(self, questions, contexts, batch_size=256):
        """How many windows the examples make (a tokenizing pass without
        offsets or windows)."""
        windower, tokenizer = self.windower, self.tokenizer

        def count(question, context):
            question_ids, ids, _, _ = windower.tokenize(tokenizer, question, context,
                                                        offsets=False)
            return tf.reduce_sum(windower.num_windows(question_ids, ids))

        counts = tf.data.Dataset.from_tensor_slices((questions, contexts)).batch(batch_size).map(
            count, num_parallel_calls=tf.data.AUTOTUNE)
        return int(counts.reduce(tf.constant(0, tf.int64), lambda total, n: total + n))

    def dataset(self, x, y=None, sample_weight=None, batch_size=32, shuffle=False, seed=None,
                num_labels=None, fixed_shapes=False):
        """Raw QA inputs -> batches of `batch_size` windows: model inputs, and
        `{start_positions, end_positions}` with answers (see the class)."""
        if sample_weight is not None:
            raise UsageError("QuestionAnswerer takes no sample_weight with raw text.")
        batch_size = int(batch_size or 32)
        num_windows = None
        if isinstance(x, tf.data.Dataset):
            if y is not None:
                raise ValueError("With a tf.data.Dataset, answers come inside its elements "
                                 "((question, context), answers), not as y=.")
            examples = self._dataset_examples(x)
            labels = "answer_text" in examples.element_spec
        else:
            columns = self._columns(x, y)
            labels = y is not None
            examples = tf.data.Dataset.from_tensor_slices(columns)
            if labels:
                num_windows = self.count_windows(columns["question"], columns["context"])
            elif shuffle:
                examples = examples.shuffle(len(columns["index"]), seed=seed,
                                            reshuffle_each_iteration=True)

        def split(chunk):
            features = {name: chunk[name] for name in MODEL_INPUTS}
            if not labels:
                return features
            return features, {name: chunk[name] for name in LABELS}

        windows = self._windows(examples, batch_size, labels).map(split).unbatch()
        if shuffle and num_windows is not None:
            # Every window of the set, shuffled by the seed: the order of
            # `make_dataset` over the same windows as --features.
            windows = windows.cache().shuffle(num_windows, seed=seed,
                                              reshuffle_each_iteration=True)
        if shuffle and num_windows is not None and self.bucket_by_length and not fixed_shapes:
            batches = bucket_batches(windows, batch_size, seed=seed)
        else:
            batches = windows.batch(batch_size)
        dataset = self.trimmed(batches, fixed_shapes)
        if num_windows is not None:
            dataset = dataset.apply(tf.data.experimental.assert_cardinality(
                math.ceil(num_windows / batch_size)))
        return dataset.prefetch(tf.data.AUTOTUNE)

    def predict_dataset(self, x, batch_size=32, fixed_shapes=False):
        """(batches of windows, the windows' decoding extras). The windows
        are cut once: the extras come from the in-memory cache that
        `predict`'s pass over the features fills."""
        batch_size = int(batch_size or 32)
        if isinstance(x, tf.data.Dataset):
            examples, contexts = self._dataset_examples(x), None
        else:
            columns = self._columns(x)
            examples = tf.data.Dataset.from_tensor_slices(columns)
            contexts = [_as_text(c) for c in x[1]]
        chunks = self._windows(examples, batch_size, labels=False, extras=True,
                               texts=contexts is None).cache()
        features = chunks.map(lambda chunk: {name: chunk[name] for name in MODEL_INPUTS})
        features = self.trimmed(features.unbatch().batch(batch_size), fixed_shapes)
        return features.prefetch(tf.data.AUTOTUNE), (chunks, contexts)

    def postprocess(self, outputs, context):
        chunks, contexts = context
        keys = EXTRAS + (("context",) if contexts is None else ())
        parts = {k: [] for k in keys}
        for chunk in chunks.map(lambda c: {k: c[k] for k in keys}).as_numpy_iterator():
            for k in keys:
                parts[k].append(chunk[k])
        extras = {k: np.concatenate(v) for k, v in parts.items()}
        count = len(outputs["start_logits"])  # all the windows, unless predict(steps=...)
        extras = {k: v[:count] for k, v in extras.items()}
        example_index = extras["example_index"]
        if contexts is None:
            contexts = [""] * (int(example_index.max()) + 1 if len(example_index) else 0)
            for i, text in zip(example_index, extras["context"]):
                contexts[i] = text.decode("utf-8")
        offsets = np.stack([extras["start_char"], extras["end_char"]], -1)
        predictions = decode_answers(
            contexts, outputs["start_logits"], outputs["end_logits"], offsets, example_index,
            token_is_max_context=extras["is_max_context"],
            max_answer_length=self.max_answer_length,
            null_score_diff_threshold=self.null_score_diff_threshold,
            version_2_with_negative=self.version_2_with_negative)
        return [{"answer": p.text, "start_char": p.start_char, "end_char": p.end_char,
                 "score": p.score, "null_score": p.null_score, "score_diff": p.score_diff,
                 "no_answer": p.text == ""} for p in predictions]

    def get_config(self):
        return {**super().get_config(), **self.qa_options()}
