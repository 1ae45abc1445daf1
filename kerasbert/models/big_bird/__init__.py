from kerasbert.models.big_bird.big_bird_backbone import BigBirdBackbone
from kerasbert.models.big_bird.big_bird_presets import BIG_BIRD_PRESETS
from kerasbert.models.presets import register_presets

register_presets(BigBirdBackbone, BIG_BIRD_PRESETS)
