"""`Task.from_preset`: a task model on the backbone and the tokenizer a
handle stands for, with its preprocessor attached and the recipe of its
family and size compiled in (as keras-hub's tasks come compiled).

    handle                          backbone               tokenizer
    preset name ("bert_tiny")       random, that size      none (token ids only), or tokenizer=
    hf://, kaggle://, a directory   its weights            its own files (kerasbert.text.load_tokenizer)
    kerasbert run directory         its model              the run's copy
    a .keras file                   its backbone           the preprocessor's, from the archive
    an ELMo biLM                    its weights            its characters (CharacterTokenizer)

The preprocessor comes from the one factory (`tasks.preprocessor_factory`).
"""

from kerasbert.sources import source
from kerasbert.models.presets import family_of
from kerasbert.models import presets
from kerasbert.optimizers.recipes import default_recipe
from kerasbert.optimizers.recipes import is_published_checkpoint
from kerasbert.tasks.preprocessor_factory import handle_tokenizer
from kerasbert.tasks.preprocessor_factory import preprocessor_from_source
from kerasbert.tasks.preprocessor_factory import preprocessor_options


def build_from_preset(cls, handle, *, tokenizer=None, sequence_length=None, label_names=None,
                      compile=True, backbone_overrides=None, dtype=None, **kwargs):
    """See `Task.from_preset`."""
    found = source.resolve(handle, presets)
    backbone = source.load_backbone(found, dtype=dtype, **(backbone_overrides or {}))
    tokenizer = handle_tokenizer(handle, found, backbone, tokenizer)
    if label_names is not None:
        label_names = [str(name) for name in label_names]
        size = cls.label_argument
        if size and kwargs.get(size) is None:
            kwargs[size] = len(label_names)
    options = preprocessor_options(cls.preprocessor_class)
    given = {name: kwargs.pop(name) for name in list(kwargs) if name in options}
    model = cls(backbone, **kwargs)
    preprocessor = preprocessor_from_source(model, tokenizer, sequence_length, label_names,
                                            **given)
    if preprocessor is not None:
        model.preprocessor = preprocessor
    if compile:
        published = is_published_checkpoint(found)
        recipe = default_recipe(family_of(type(backbone)), backbone.num_layers,
                                backbone.hidden_dim, published=published)
        model.compile_with_recipe(recipe)
    return model
