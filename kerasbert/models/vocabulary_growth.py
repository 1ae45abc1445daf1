"""Growing a backbone's vocabulary for tokens its checkpoint never had.

GPT-1 was published without start, separator, padding or mask tokens; the
GPT paper fine-tunes with new embeddings for them, and so does the zoo
(`kerasbert.text.Gpt1Tokenizer` appends them after the published ids).
`grow_vocabulary` returns the same backbone with that many more rows in
every table indexed by token id: the published rows first, unchanged; the
new ones drawn from the backbone's initializer distribution, so they start
as an untrained token would.
"""

import numpy as np

from kerasbert.errors import UsageError
from kerasbert.layers.initializers import loads_checkpoint


@loads_checkpoint
def grow_vocabulary(backbone, vocabulary_size, seed=0):
    """`backbone` rebuilt with `vocabulary_size` tokens (>= its own).

    Args:
        backbone: any zoo backbone (its config has `vocabulary_size`).
        vocabulary_size: the new size.
        seed: seeds the new rows (the same seed, the same rows).

    Returns:
        The backbone itself when the size is already right, else a new one
        of the same class and config; every weight is copied, and the
        [vocabulary, ...] tables get rows appended (N(0, initializer_range),
        0.02 when the family has no such argument).

    Raises:
        UsageError: a smaller size (that would drop trained tokens).
    """
    config = backbone.get_config()
    old = config["vocabulary_size"]
    if vocabulary_size == old:
        return backbone
    if vocabulary_size < old:
        raise UsageError(f"Cannot shrink a vocabulary of {old} tokens to {vocabulary_size}: "
                         "the tokenizer does not belong to these weights.")
    config["vocabulary_size"] = vocabulary_size
    grown = type(backbone).from_config(config)
    stddev = float(config.get("initializer_range", 0.02))
    rng = np.random.default_rng(seed)
    values = []
    for new, value in zip(grown.weights, backbone.get_weights()):
        shape = tuple(new.shape)
        if shape != value.shape:
            if shape[1:] != value.shape[1:] or value.shape[0] != old:
                raise ValueError(f"{new.path}: {value.shape} cannot grow into {shape}.")
            extra = rng.normal(0.0, stddev, (vocabulary_size - old,) + shape[1:])
            value = np.concatenate([value, extra.astype(value.dtype)], axis=0)
        values.append(value)
    grown.set_weights(values)
    return grown
