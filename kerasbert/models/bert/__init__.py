from kerasbert.models.bert.bert_backbone import BertBackbone
from kerasbert.models.bert.bert_presets import BERT_PRESETS
from kerasbert.models.presets import register_presets

register_presets(BertBackbone, BERT_PRESETS)
