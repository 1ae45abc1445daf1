"""Raw (question, context) pairs with SQuAD answers -> `QuestionAnswerer`
windows, and the windows' logits -> answer spans in the contexts."""

import keras
import numpy as np
import tensorflow as tf

from kerasbert.data.finetuning.dataset import make_dataset
from kerasbert.data.finetuning.examples import TaskData
from kerasbert.data.finetuning.qa import convert_qa
from kerasbert.errors import UsageError
from kerasbert.preprocessing.qa_decoding import decode_answers
from kerasbert.preprocessing.task_preprocessor import TaskPreprocessor


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


@keras.saving.register_keras_serializable(package="kerasbert")
class QuestionAnswererPreprocessor(TaskPreprocessor):
    """Windows `[CLS] question [SEP] context window [SEP]` (RoBERTa: two
    separators), `doc_stride` pieces apart, as the CLI's converter
    (`kerasbert.data.finetuning.convert_qa`) and the exported graph cut
    them; start/end labels from the first answer's character span.

    Inputs: `(questions, contexts)`; labels: one SQuAD answer per question
    (`{"text": ..., "answer_start": ...}`, a list of them, or None for a
    question without an answer). `predict` returns one dict per question:
    `answer`, `start_char`, `end_char` (code points in the context, end
    exclusive; -1 for no answer), `score`, `null_score` (the [CLS] score),
    `score_diff` (null_score - score, what the SQuAD v2.0 threshold
    compares), `no_answer`.

    The windowing runs in Python over NumPy (its tokenization batched
    through tensorflow-text) before the `tf.data` pipeline; one example
    becomes several windows, so a batch holds windows, not questions.

    Args:
        doc_stride, max_query_length: windowing (128, 64).
        max_answer_length: longest answer in pieces (30).
        null_score_diff_threshold: SQuAD v2.0 no-answer threshold (0.0).
        version_2_with_negative: answer "" when the null score wins; set by
            the first labelled data that holds a question without an answer.
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

    def inputs_of(self, data):
        return (([e["question"] for e in data.examples], [e["context"] for e in data.examples]),
                [[] if e.get("is_impossible") else e["answers"] for e in data.examples])

    def _task_data(self, x, y=None):
        if isinstance(x, tf.data.Dataset):
            raise UsageError("QuestionAnswerer takes (questions, contexts) as lists or arrays; "
                             "for a tf.data dataset, pass list(dataset.as_numpy_iterator()) "
                             "columns.")
        if not (isinstance(x, tuple) and len(x) == 2):
            raise UsageError("QuestionAnswerer takes x=(questions, contexts).")
        questions, contexts = ([_as_text(v) for v in column] for column in x)
        if len(questions) != len(contexts):
            raise UsageError(f"{len(questions)} questions for {len(contexts)} contexts.")
        if y is not None and len(y) != len(questions):
            raise UsageError(f"{len(y)} answers for {len(questions)} questions.")
        examples = []
        for i, (question, context) in enumerate(zip(questions, contexts)):
            answers = _answers(y[i], f"answer {i}") if y is not None else []
            examples.append({"id": str(i), "question": question, "context": context,
                             "answers": answers, "is_impossible": y is not None and not answers})
        if y is not None and any(e["is_impossible"] for e in examples):
            self.version_2_with_negative = True
        return TaskData(examples, "qa", name="qa", split="train" if y is not None else "predict")

    def features(self, x, y=None):
        """`TaskFeatures` of the windows (`convert_qa`)."""
        data = self._task_data(x, y)
        try:
            return data, convert_qa(data, self.tokenizer, self.sequence_length,
                                    doc_stride=self.doc_stride,
                                    max_query_length=self.max_query_length,
                                    is_training=y is not None)
        except ValueError as error:
            raise UsageError(str(error)) from None

    def is_raw(self, x):
        return isinstance(x, tuple) and len(x) == 2 and super().is_raw(x[0])

    def dataset(self, x, y=None, sample_weight=None, batch_size=32, shuffle=False, seed=None,
                num_labels=None):
        if sample_weight is not None:
            raise UsageError("QuestionAnswerer takes no sample_weight with raw text.")
        _, features = self.features(x, y)
        return make_dataset(features, int(batch_size or 32), shuffle=shuffle, seed=seed,
                            labels=y is not None)

    def predict_dataset(self, x, batch_size=32):
        data, features = self.features(x)
        return make_dataset(features, int(batch_size or 32), labels=False), (data, features)

    def postprocess(self, outputs, context):
        data, features = context
        offsets = np.stack([features.extras["token_start_char"],
                            features.extras["token_end_char"]], -1)
        predictions = decode_answers(
            [e["context"] for e in data.examples], outputs["start_logits"],
            outputs["end_logits"], offsets, features.extras["example_index"],
            token_is_max_context=features.extras.get("token_is_max_context"),
            max_answer_length=self.max_answer_length,
            null_score_diff_threshold=self.null_score_diff_threshold,
            version_2_with_negative=self.version_2_with_negative)
        return [{"answer": p.text, "start_char": p.start_char, "end_char": p.end_char,
                 "score": p.score, "null_score": p.null_score, "score_diff": p.score_diff,
                 "no_answer": p.text == ""} for p in predictions]

    def get_config(self):
        return {**super().get_config(), **self.qa_options()}
