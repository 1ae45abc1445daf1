"""`Task.from_preset`: a task model on the backbone and the tokenizer a
handle stands for, with its preprocessor attached and the recipe of its
family and size compiled in (as keras-hub's tasks come compiled).

    handle                          backbone               tokenizer
    preset name ("bert_tiny")       random, that size      none (token ids only), or tokenizer=
    hf://, kaggle://, a directory   its weights            its own files (kerasbert.text.load_tokenizer)
    kerasbert run directory         its model              the run's copy
    a .keras file                   its backbone           the preprocessor's, from the archive
"""

import keras

from kerasbert.errors import UsageError
from kerasbert.sources import source
from kerasbert.models.presets import family_of
from kerasbert.models import presets
from kerasbert.optimizers.recipes import default_recipe
from kerasbert.optimizers.recipes import is_published_checkpoint
from kerasbert.text import load_tokenizer


def handle_tokenizer(handle, found):
    """The tokenizer that comes with a resolved handle, or None (a built-in
    preset has no vocabulary)."""
    if found.kind == source.PRESET:
        return None
    if found.kind == source.KERAS:
        model = keras.saving.load_model(found.path, compile=False)
        preprocessor = getattr(model, "preprocessor", None)
        return None if preprocessor is None else preprocessor.tokenizer
    try:
        return load_tokenizer(found.path if not found.is_published else handle)
    except UsageError:
        if found.is_published:
            raise
        return None  # e.g. a run directory whose vocabulary lives elsewhere: tokenizer=


def build_from_preset(cls, handle, *, tokenizer=None, sequence_length=None, label_names=None,
                      compile=True, backbone_overrides=None, dtype=None, **kwargs):
    """See `Task.from_preset`."""
    found = source.resolve(handle, presets)
    backbone = source.load_backbone(found, dtype=dtype, **(backbone_overrides or {}))
    if tokenizer is None:
        tokenizer = handle_tokenizer(handle, found)
    elif not hasattr(tokenizer, "tokenize_ids"):
        tokenizer = load_tokenizer(tokenizer)
    if tokenizer is not None and tokenizer.vocabulary_size != backbone.vocabulary_size:
        raise UsageError(f"The tokenizer has {tokenizer.vocabulary_size} tokens but the backbone's "
                         f"embedding table has {backbone.vocabulary_size}: they are not one model's.")
    if label_names is not None:
        label_names = [str(name) for name in label_names]
        size = cls.label_argument
        if size and kwargs.get(size) is None:
            kwargs[size] = len(label_names)
    options = (getattr(cls.preprocessor_class, "batch_options", ())
               + tuple(getattr(cls.preprocessor_class, "options", ())))
    given = {name: kwargs.pop(name) for name in list(kwargs) if name in options}
    model = cls(backbone, **kwargs)
    if tokenizer is not None and cls.preprocessor_class is not None:
        positions = getattr(backbone, "max_sequence_length", None)
        arguments = {**model.preprocessor_arguments(), **given}
        preprocessor = cls.preprocessor_class(tokenizer, sequence_length, label_names,
                                              **arguments)
        if positions and preprocessor.sequence_length > int(positions):
            if sequence_length:
                raise UsageError(f"sequence_length {sequence_length} is above the backbone's "
                                 f"{positions} positions.")
            preprocessor = cls.preprocessor_class(tokenizer, int(positions), label_names,
                                                  **arguments)
        if label_names is not None:
            preprocessor.set_label_names(label_names, model.num_label_names())
        model.preprocessor = preprocessor
    if compile:
        published = is_published_checkpoint(found)
        recipe = default_recipe(family_of(type(backbone)), backbone.num_layers,
                                backbone.hidden_dim, published=published)
        model.compile_with_recipe(recipe)
    return model
