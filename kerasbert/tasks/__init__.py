"""Pretrainers and fine-tuning task models.

Names load on first use, so importing the package does not pull in Keras.
"""

from kerasbert.io_utils import lazy_exports

_EXPORTS = {
    "BertPretrainer": "kerasbert.tasks.bert_pretrainer",
    "ElectraPretrainer": "kerasbert.tasks.electra_pretrainer",
    "CausalLM": "kerasbert.tasks.causal_lm",
    "GptClassifier": "kerasbert.tasks.gpt_classifier",
    "Distiller": "kerasbert.tasks.distiller",
    "Task": "kerasbert.tasks.task",
    "TextClassifier": "kerasbert.tasks.text_classifier",
    "TokenClassifier": "kerasbert.tasks.token_classifier",
    "QuestionAnswerer": "kerasbert.tasks.question_answerer",
    "MultipleChoice": "kerasbert.tasks.multiple_choice",
    "StreamingPearsonCorrelation": "kerasbert.tasks.pearson_correlation",
    "first_subtoken_weights": "kerasbert.tasks.token_classifier",
    "decode_word_labels": "kerasbert.tasks.token_classifier",
    "SpanPrediction": "kerasbert.tasks.qa_decoding",
    "decode_answer": "kerasbert.tasks.qa_decoding",
    "decode_answers": "kerasbert.tasks.qa_decoding",
    "window_spans": "kerasbert.tasks.qa_decoding",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports("kerasbert.tasks", _EXPORTS)
