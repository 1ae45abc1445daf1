"""Task preprocessors: raw text <-> model features, inside every task model.

One class per example kind (`kerasbert.data.finetuning.task_formats`), each
a Keras layer that a task model carries as `model.preprocessor`; the
tokenizer's files travel in its `.keras` archive as assets. They run in
`tf.data` (`TaskPreprocessor.dataset`), never in the compiled step.

Names load on first use (TensorFlow is imported by the classes).
"""

from kerasbert.io_utils import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "task_preprocessor": ("TaskPreprocessor", "clean_text"),
    "text_classifier_preprocessor": ("TextClassifierPreprocessor",),
    "token_classifier_preprocessor": ("TokenClassifierPreprocessor",),
    "question_answerer_preprocessor": ("QuestionAnswererPreprocessor",),
    "multiple_choice_preprocessor": ("MultipleChoicePreprocessor",),
    "text2text_preprocessor": ("Text2TextPreprocessor",),
    "qa_decoding": ("SpanPrediction", "decode_answer", "decode_answers", "window_spans"),
    "qa_windows": ("QAWindows", "answer_char_spans"),
})
