"""Backbones (one folder per family) and the preset registry."""

from kerasbert.models.backbone import Backbone
from kerasbert.models.bert import BertBackbone
from kerasbert.models.albert import AlbertBackbone
from kerasbert.models.roberta import RobertaBackbone
from kerasbert.models.distil_bert import DistilBertBackbone
from kerasbert.models.electra import ElectraBackbone
from kerasbert.models.big_bird import BigBirdBackbone
from kerasbert.models.gpt import GptBackbone
from kerasbert.models.reformer import ReformerBackbone
from kerasbert.models.transformer import TransformerBackbone
from kerasbert.models.elmo import ElmoBackbone
from kerasbert.models.modernbert import ModernBertBackbone
from kerasbert.models.attention_maps import attention_maps
from kerasbert.models.attention_maps import plot_attention
from kerasbert.models.presets import UnknownPresetError
from kerasbert.models.presets import get_preset
from kerasbert.models.presets import list_presets


def from_preset(name, **overrides):
    """Builds any registered preset, or loads a handle to published weights
    (`Backbone.from_preset`), whatever its family."""
    return Backbone.from_preset(name, **overrides)
