"""Weight import/export between kerasbert and its peers."""

from kerasbert.convert.bert_config import bert_config_to_kwargs
from kerasbert.convert.bert_config import kwargs_to_bert_config
from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.bert_weights import set_bert_weights
from kerasbert.convert.hf_checkpoint import from_hf_directory
from kerasbert.convert.keras_hub import from_keras_hub
from kerasbert.convert.keras_hub import to_keras_hub
from kerasbert.convert.tf1_checkpoint import load_bert_checkpoint
from kerasbert.convert.tf1_checkpoint import load_pretraining_heads
from kerasbert.convert.tf1_checkpoint import save_bert_checkpoint
from kerasbert.convert.tf_models import from_tf_models
from kerasbert.convert.tf_models import from_tf_models_checkpoint
