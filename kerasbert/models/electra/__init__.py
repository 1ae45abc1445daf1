from kerasbert.models.electra.electra_backbone import ElectraBackbone
from kerasbert.models.electra.electra_presets import ELECTRA_PRESETS
from kerasbert.models.presets import register_presets

register_presets(ElectraBackbone, ELECTRA_PRESETS)
