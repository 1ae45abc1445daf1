"""Pretrainers and fine-tuning task models.

Importing the package registers every task class with Keras (and, through
them, the backbones, optimizers, schedules and preprocessors a task model
holds), so `keras.saving.load_model("model.keras")` works after
`import kerasbert.tasks`, as after `import keras_hub`. `import kerasbert`
alone stays free of Keras (the CLI's `--help` is instant).
"""

from kerasbert.tasks.bert_pretrainer import BertPretrainer
from kerasbert.tasks.causal_lm import CausalLM
from kerasbert.tasks.distiller import Distiller
from kerasbert.tasks.electra_pretrainer import ElectraPretrainer
from kerasbert.tasks.gpt_classifier import GptClassifier
from kerasbert.tasks.multiple_choice import MultipleChoice
from kerasbert.tasks.pearson_correlation import StreamingPearsonCorrelation
from kerasbert.tasks.question_answerer import QuestionAnswerer
from kerasbert.tasks.sentence_encoder import SentenceEncoder
from kerasbert.tasks.sentence_encoder import load_sentence_tokenizer
from kerasbert.tasks.sentence_encoder import sentence_model_of
from kerasbert.tasks.seq2seq_lm import LabelSmoothedCrossEntropy
from kerasbert.tasks.seq2seq_lm import Seq2SeqLM
from kerasbert.tasks.task import Task
from kerasbert.tasks.text_classifier import TextClassifier
from kerasbert.tasks.token_classifier import TokenClassifier
from kerasbert.tasks.token_classifier import decode_word_labels
from kerasbert.tasks.token_classifier import first_subtoken_weights

__all__ = [
    "BertPretrainer", "CausalLM", "Distiller", "ElectraPretrainer", "GptClassifier",
    "LabelSmoothedCrossEntropy", "MultipleChoice", "QuestionAnswerer", "SentenceEncoder",
    "Seq2SeqLM", "StreamingPearsonCorrelation",
    "Task", "TextClassifier", "TokenClassifier", "decode_word_labels",
    "first_subtoken_weights", "load_sentence_tokenizer", "sentence_model_of",
]
