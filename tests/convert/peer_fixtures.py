"""What the converter tests share: random values in every weight of a
peer (keras-hub, Model Garden) or of ours, one padded batch, the two input
layouts, and the parity assertions."""

import numpy as np


def randomize(model, seed=0, gammas_near_one=False):
    """Random values everywhere (LayerNorm and biases too), so a mapping
    mistake cannot hide behind ones and zeros: N(0, 0.2), LayerNorm gammas
    1 + N(0, 0.2) with `gammas_near_one` (as Model Garden's tests do).
    `model` is a model or a list of variables; it is returned."""
    weights = model.weights if hasattr(model, "weights") else model
    rng = np.random.default_rng(seed)
    for w in weights:
        value = rng.normal(0, 0.2, w.shape)
        if gammas_near_one and "gamma" in w.name:
            value += 1.0
        w.assign(value.astype("float32"))
    return model


def padded_batch(vocab, batch_size=3, length=10, seed=1):
    """(ids, mask, types), int32 [batch_size, length]: row 0 full, row i
    padded by its last 3 * i tokens; segment 1 from the middle; ids and
    types are 0 under padding, as a packer writes them."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, (batch_size, length), dtype="int32")
    mask = np.ones((batch_size, length), "int32")
    for i in range(1, batch_size):
        mask[i, length - 3 * i:] = 0
    types = (np.arange(length) >= length // 2).astype("int32")[None].repeat(batch_size, 0)
    return ids * mask, mask, types * mask


def ours_inputs(ids, mask, types=None):
    """Our (TF Hub) input names; no types: one segment."""
    types = np.zeros_like(ids) if types is None else types
    return {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}


def hub_inputs(ids, mask, types=None):
    """keras-hub's input names (no `segment_ids` for RoBERTa, DistilBERT)."""
    inputs = {"token_ids": ids, "padding_mask": mask}
    if types is not None:
        inputs["segment_ids"] = types
    return inputs


def max_diff(expected, got, keys=("sequence_output", "pooled_output")):
    return max(
        float(np.max(np.abs(np.asarray(got[k]) - np.asarray(expected[k])))) for k in keys
    )


def assert_close(expected, got, keys=("sequence_output", "pooled_output"), atol=1e-5):
    for key in keys:
        np.testing.assert_allclose(
            np.asarray(got[key]), np.asarray(expected[key]), atol=atol, err_msg=key
        )


def assert_close_on_real_tokens(got, sequence_output, pooled_output, mask, atol=1e-5):
    """Our outputs against a reference's: `sequence_output` at the real
    tokens only (padded positions are garbage in both), `pooled_output`."""
    real = np.asarray(mask).astype(bool)
    np.testing.assert_allclose(
        np.asarray(got["sequence_output"])[real], np.asarray(sequence_output)[real],
        atol=atol, rtol=0,
    )
    np.testing.assert_allclose(
        np.asarray(got["pooled_output"]), np.asarray(pooled_output), atol=atol, rtol=0
    )


def tf_models_encoder(cls, seed=7, **config):
    """A Model Garden encoder (`cls`, e.g. `networks.BertEncoder`) built on
    a padded batch, with random weights."""
    encoder = cls(**config)
    encoder(ours_inputs(*padded_batch(config["vocab_size"])))  # V2 builds on call
    return randomize(encoder, seed, gammas_near_one=True)
