"""The tiny encoder every backbone test starts from, and its inputs.

`tiny_encoder_config()` is a two-layer, 16-wide encoder over 50 token ids
(12 positions); `tiny_encoder_inputs()` a batch of two rows of eight tokens
in the TF Hub names, the last row padded after five tokens, so padding,
segments and half precision are exercised by the default sizes.
"""

import numpy as np

TINY_ENCODER = dict(vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=16,
                    intermediate_dim=32, max_sequence_length=12)


def tiny_encoder_config(**overrides):
    """The tiny encoder's constructor arguments, with `overrides` applied
    (a family's own arguments, such as `embedding_dim` or `block_size`,
    are simply added)."""
    return {**TINY_ENCODER, **overrides}


def tiny_encoder_inputs(
    batch=2, length=8, vocabulary_size=50, segments=True, seed=3, padding=3
):
    """The backbone's three int32 inputs, `[batch, length]` each.

    Token ids are `RandomState(seed).randint(0, vocabulary_size)`; every row
    is real except the last, whose final `padding` positions are padding
    (mask 0). With `segments` the second half of each row is segment 1,
    without it every type id is 0.
    """
    if not 0 < padding < length:
        raise ValueError(f"padding must be in [1, {length - 1}], got {padding}.")
    rng = np.random.RandomState(seed)
    ids = rng.randint(0, vocabulary_size, (batch, length)).astype("int32")
    mask = np.ones((batch, length), "int32")
    mask[-1, length - padding:] = 0
    types = np.zeros((batch, length), "int32")
    if segments:
        types[:, length // 2:] = 1
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
