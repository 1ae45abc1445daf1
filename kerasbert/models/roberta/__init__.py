from kerasbert.models.presets import register_presets
from kerasbert.models.roberta.roberta_backbone import RobertaBackbone
from kerasbert.models.roberta.roberta_presets import ROBERTA_PRESETS

register_presets(RobertaBackbone, ROBERTA_PRESETS)
