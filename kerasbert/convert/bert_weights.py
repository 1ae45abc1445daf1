"""The canonical BERT weight dict, and the one mapping of it onto ours.

Every converter goes through this format: a peer's layout is translated into
(or out of) the canonical dict in that peer's module, and only this module
knows where each tensor lives inside `BertBackbone`. The canonical layout is
the original BERT's: 2-D dense kernels [in, out], head-major columns.

    {
      "word_embeddings": [V, E], "position_embeddings": [P, E],
      "type_embeddings": [S, E],
      "embeddings_ln_gamma": [E], "embeddings_ln_beta": [E],
      "embedding_projection_kernel": [E, H],  # only when E != H
      "embedding_projection_bias": [H],
      "layers": [  # one dict per layer
        {"query_kernel": [H, H], "query_bias": [H],
         "key_kernel", "key_bias", "value_kernel", "value_bias",
         "attention_output_kernel": [H, H], "attention_output_bias": [H],
         "attention_ln_gamma", "attention_ln_beta",
         "intermediate_kernel": [H, I], "intermediate_bias": [I],
         "output_kernel": [I, H], "output_bias": [H],
         "output_ln_gamma", "output_ln_beta"},
      ],
      "pooler_kernel": [H, H], "pooler_bias": [H],
    }
"""

import numpy as np


LAYER_KEYS = (
    "query_kernel",
    "query_bias",
    "key_kernel",
    "key_bias",
    "value_kernel",
    "value_bias",
    "attention_output_kernel",
    "attention_output_bias",
    "attention_ln_gamma",
    "attention_ln_beta",
    "intermediate_kernel",
    "intermediate_bias",
    "output_kernel",
    "output_bias",
    "output_ln_gamma",
    "output_ln_beta",
)


#: Stored tensors larger than this are assigned in slices of rows, so a load
#: never holds a second full copy of a large table (the word embeddings).
_SLICE_BYTES = 4 * 2**20


def _assign(variable, value, name):
    """`variable` = `value` (an array, or a `StoredTensor` read on use)."""
    if tuple(variable.shape) != tuple(value.shape):
        raise ValueError(
            f"Shape mismatch for {name}: the model has "
            f"{tuple(variable.shape)}, the source has {tuple(value.shape)}."
        )
    rows = _row_reader(variable, value)
    if rows is not None:
        step = max(1, _SLICE_BYTES // max(1, value.nbytes // value.shape[0]))
        import tensorflow as tf  # lazy: only the TensorFlow backend slices (`_row_reader`)

        for start in range(0, value.shape[0], step):
            stop = min(start + step, value.shape[0])
            # A row scatter writes in place, ~3x faster than a strided-slice
            # assign (which reads the whole variable for each slice).
            variable.value.scatter_update(tf.IndexedSlices(
                rows(start, stop).astype(variable.dtype, copy=False),
                tf.range(start, stop, dtype=tf.int64)))
        # A scatter leaves the variable in TensorFlow's copy-on-read mode:
        # from then on every dense read copies the whole tensor (3 ms for
        # MiniLM's 30522 x 384 table, at every forward pass and optimizer
        # step). The load's last sparse write is done; turn it back off.
        tf.raw_ops.DisableCopyOnRead(resource=variable.value.handle)
        return
    value = np.asarray(value)
    # copy=False: a float32 source is not copied again.
    variable.assign(value.astype(variable.dtype, copy=False))


def _row_reader(variable, value):
    """`rows(start, stop)` for a large value assigned in slices (TensorFlow
    backend), or None: sources that read rows alone (safetensors, a
    keras-hub HDF5 dataset) read only those rows; other large values (a
    transposed Linear weight) are read once and sliced, which still spares
    the whole-tensor copy an `assign` makes."""
    import keras  # lazy: keras (the backend decides whether slices assign in place)

    if (keras.backend.backend() != "tensorflow" or getattr(value, "nbytes", 0) <= _SLICE_BYTES
            or len(value.shape) < 1):
        return None
    if hasattr(value, "rows") and not value.transposed:
        return value.rows
    array = np.asarray(value)
    return lambda start, stop: array[start:stop]


def _top_variables(backbone):
    """(canonical key, variable) outside the encoder blocks; optional parts
    (pooler, segment table, factorised projection) only when the model has
    them."""
    emb = backbone.embeddings
    pairs = [
        ("word_embeddings", emb.token_embedding.embeddings),
        ("position_embeddings", emb.position_embedding.position_embeddings),
    ]
    if emb.layer_norm is not None:  # GPT-1: no LayerNorm on the embedding sum
        pairs.append(("embeddings_ln_gamma", emb.layer_norm.gamma))
        pairs.append(("embeddings_ln_beta", emb.layer_norm.beta))
    if getattr(backbone, "pooler", None) is not None:  # RoBERTa, DistilBERT: none
        pairs.append(("pooler_kernel", backbone.pooler.dense.kernel))
        pairs.append(("pooler_bias", backbone.pooler.dense.bias))
    if emb.segment_embedding is not None:
        pairs.append(("type_embeddings", emb.segment_embedding.embeddings))
    if emb.projection is not None:
        pairs.append(("embedding_projection_kernel", emb.projection.kernel))
        pairs.append(("embedding_projection_bias", emb.projection.bias))
    return pairs


def _block_variables(block):
    """(canonical key, variable) of one block, except the fused query/key/
    value projection, which three canonical entries share."""
    attn = block.attention
    return (
        ("attention_output_kernel", attn.output_dense.kernel),
        ("attention_output_bias", attn.output_dense.bias),
        ("attention_ln_gamma", block.attention_layer_norm.gamma),
        ("attention_ln_beta", block.attention_layer_norm.beta),
        ("intermediate_kernel", block.intermediate_dense.kernel),
        ("intermediate_bias", block.intermediate_dense.bias),
        ("output_kernel", block.output_dense.kernel),
        ("output_bias", block.output_dense.bias),
        ("output_ln_gamma", block.output_layer_norm.gamma),
        ("output_ln_beta", block.output_layer_norm.beta),
    )


_QKV = ("query", "key", "value")


def get_block_weights(block):
    """One `TransformerEncoderBlock` -> canonical layer dict (numpy); the
    fused query/key/value projection is split into three entries."""
    qkv = block.attention.qkv_dense
    layer = {key: v.numpy() for key, v in _block_variables(block)}
    for part, kernel, bias in zip(
        _QKV, np.split(qkv.kernel.numpy(), 3, axis=-1), np.split(qkv.bias.numpy(), 3, axis=-1)
    ):
        layer[f"{part}_kernel"], layer[f"{part}_bias"] = kernel, bias
    return layer


def set_block_weights(block, src, where="layer"):
    """Canonical layer dict -> one built `TransformerEncoderBlock`."""
    qkv = block.attention.qkv_dense
    _assign(qkv.kernel, np.concatenate([src[f"{p}_kernel"] for p in _QKV], axis=-1),
            f"{where} query/key/value kernels")
    _assign(qkv.bias, np.concatenate([src[f"{p}_bias"] for p in _QKV]),
            f"{where} query/key/value biases")
    for key, variable in _block_variables(block):
        _assign(variable, src[key], f"{where} {key}")


def get_bert_weights(backbone):
    """Reads a backbone's weights into the canonical dict (numpy): BERT,
    RoBERTa, DistilBERT (no segment table or pooler: those keys are None or
    absent). ALBERT's shared blocks: `albert_weights.get_albert_weights`."""
    weights = {key: v.numpy() for key, v in _top_variables(backbone)}
    weights.setdefault("type_embeddings", None)
    weights["layers"] = [get_block_weights(block) for block in backbone.transformer_layers]
    return weights


def set_bert_weights(backbone, weights):
    """Writes the canonical dict into a backbone of matching shape (keys the
    model has no place for, e.g. a pooler for RoBERTa, are ignored)."""
    if len(weights["layers"]) != len(backbone.transformer_layers):
        raise ValueError(
            f"The source has {len(weights['layers'])} layers, the model "
            f"{len(backbone.transformer_layers)}."
        )
    for key, variable in _top_variables(backbone):
        _assign(variable, weights[key], key)
    for i, (block, src) in enumerate(zip(backbone.transformer_layers, weights["layers"])):
        set_block_weights(block, src, f"layer {i}")
    return backbone
