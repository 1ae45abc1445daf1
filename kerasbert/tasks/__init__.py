"""Pretrainers and fine-tuning task models.

Names load on first use, so importing the package does not pull in Keras.
"""

from kerasbert.io_utils import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "bert_pretrainer": ("BertPretrainer",),
    "electra_pretrainer": ("ElectraPretrainer",),
    "causal_lm": ("CausalLM",),
    "gpt_classifier": ("GptClassifier",),
    "distiller": ("Distiller",),
    "task": ("Task",),
    "text_classifier": ("TextClassifier",),
    "sentence_encoder": ("SentenceEncoder", "load_sentence_tokenizer", "sentence_model_of"),
    "token_classifier": ("TokenClassifier", "first_subtoken_weights", "decode_word_labels"),
    "question_answerer": ("QuestionAnswerer",),
    "multiple_choice": ("MultipleChoice",),
    "pearson_correlation": ("StreamingPearsonCorrelation",),
    "qa_decoding": ("SpanPrediction", "decode_answer", "decode_answers", "window_spans"),
})
