from kerasbert.models.presets import register_presets
from kerasbert.models.elmo.elmo_backbone import ElmoBackbone
from kerasbert.models.elmo.elmo_presets import ELMO_PRESETS

register_presets(ElmoBackbone, ELMO_PRESETS)
