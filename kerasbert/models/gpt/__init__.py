from kerasbert.models.presets import register_presets
from kerasbert.models.gpt.gpt_backbone import GptBackbone
from kerasbert.models.gpt.gpt_presets import GPT_PRESETS

register_presets(GptBackbone, GPT_PRESETS)
