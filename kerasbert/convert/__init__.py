"""Weight import/export between kerasbert and its peers."""

from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.bert_weights import set_bert_weights
from kerasbert.convert.keras_hub import from_keras_hub
from kerasbert.convert.keras_hub import to_keras_hub
