from kerasbert.models.albert.albert_backbone import AlbertBackbone
from kerasbert.models.albert.albert_presets import ALBERT_PRESETS
from kerasbert.models.presets import register_presets

register_presets(AlbertBackbone, ALBERT_PRESETS)
