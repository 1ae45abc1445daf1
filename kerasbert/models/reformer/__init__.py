from kerasbert.models.presets import register_presets
from kerasbert.models.reformer.reformer_backbone import ReformerBackbone
from kerasbert.models.reformer.reformer_presets import REFORMER_PRESETS

register_presets(ReformerBackbone, REFORMER_PRESETS)
