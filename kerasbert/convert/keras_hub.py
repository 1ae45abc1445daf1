"""keras-hub backbones <-> ours, whatever the family: `from_keras_hub` /
`to_keras_hub` look the backbone's class up in `FAMILIES` (each family's
mapping lives in `<family>_weights.py`, BERT's in `keras_hub_bert.py`).
"""

from kerasbert.convert import albert_weights
from kerasbert.convert import distil_bert_weights
from kerasbert.convert import electra_weights
from kerasbert.convert import keras_hub_bert
from kerasbert.convert import roberta_weights
from kerasbert.layers.initializers import loads_checkpoint

#: Backbone class name (keras-hub's and ours are named alike) ->
#: (keras-hub -> ours, ours -> keras-hub).
FAMILIES = {
    "BertBackbone": (keras_hub_bert.bert_from_keras_hub, keras_hub_bert.bert_to_keras_hub),
    "AlbertBackbone": (albert_weights.albert_from_keras_hub, albert_weights.albert_to_keras_hub),
    "RobertaBackbone": (roberta_weights.roberta_from_keras_hub,
                        roberta_weights.roberta_to_keras_hub),
    "DistilBertBackbone": (distil_bert_weights.distil_bert_from_keras_hub,
                           distil_bert_weights.distil_bert_to_keras_hub),
    "ElectraBackbone": (electra_weights.electra_from_keras_hub,
                        electra_weights.electra_to_keras_hub),
}


def _converters(backbone, package):
    """The `FAMILIES` entry of the most specific class of `backbone` that
    belongs to `package` ("keras_hub" or "kerasbert"); None if none does."""
    for cls in type(backbone).__mro__:
        if cls.__module__.split(".")[0] == package and cls.__name__ in FAMILIES:
            return FAMILIES[cls.__name__]
    return None


@loads_checkpoint
def from_keras_hub(backbone):
    """Converts a keras-hub backbone into ours, whatever its family:
    BertBackbone, AlbertBackbone, RobertaBackbone, DistilBertBackbone,
    ElectraBackbone.
    Same architecture and weights; outputs agree to float32 rounding."""
    converters = _converters(backbone, "keras_hub")
    if converters is None:
        raise TypeError(
            f"from_keras_hub converts keras-hub's {', '.join(FAMILIES)}; "
            f"got {type(backbone).__name__}.")
    return converters[0](backbone)


def has_keras_hub_family(backbone):
    """Whether `to_keras_hub` converts this backbone's family."""
    return _converters(backbone, "kerasbert") is not None


def to_keras_hub(backbone):
    """Converts one of our backbones into keras-hub's of the same family."""
    converters = _converters(backbone, "kerasbert")
    if converters is None:
        raise TypeError(f"to_keras_hub: no keras-hub family for {type(backbone).__name__}.")
    return converters[1](backbone)
