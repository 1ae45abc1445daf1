"""Model Garden `Seq2SeqTransformer` <-> kerasbert `TransformerBackbone`.

tf-models-official's `official.nlp.modeling.models.Seq2SeqTransformer` (a
tf_keras model) owns, by object rather than by variable name (its names
carry global counters such as `layer_normalization_1`):

    embedding_lookup.embeddings [V, H]          shared by source, target and
                                                the tied softmax
    encoder_layer.encoder_layers[i]             TransformerEncoderBlock:
        _attention_layer._{query,key,value}_dense.kernel [H, N, D] (no bias),
        _attention_layer._output_dense.kernel [N, D, H],
        _attention_layer_norm, _intermediate_dense [H, I] + bias,
        _output_dense [I, H] + bias, _output_layer_norm
    encoder_layer.output_normalization          the pre-LN stack's final norm
    decoder_layer.decoder_layers[i]             TransformerDecoderBlock:
        self_attention (as above), self_attention_layer_norm,
        encdec_attention (as above), encdec_attention_layer_norm,
        intermediate_dense, output_dense, output_layer_norm
    decoder_layer.output_normalization

Ours fuses [query | key | value] into one [H, 3H] kernel (head-major
columns, the [H, N, D] kernels reshaped) and the cross-attention's
[key | value] into one [H, 2H]. Model Garden's layout is pre-LN with the
[sin | cos] sinusoid, so its models convert to `norm_first=True,
position_encoding="concatenated"`.

The canonical dict (`read_tf_models_seq2seq`, `read_transformer`) holds
numpy arrays: "embeddings", "encoder" and "decoder" (one dict per layer),
"encoder_norm", "decoder_norm" ((gamma, beta) or None).
"""

import numpy as np

from kerasbert.models.transformer import TransformerBackbone


def _value(variable):
    return np.asarray(variable.numpy() if hasattr(variable, "numpy") else variable)


def _norm(layer):
    return (_value(layer.gamma), _value(layer.beta))


def _heads(dense, output=False):
    """An EinsumDense kernel -> [H, H]: a projection's [H, N, D], or the
    output's [N, D, H]."""
    kernel = _value(dense.kernel)
    if output:
        return kernel.reshape(-1, kernel.shape[-1])
    return kernel.reshape(kernel.shape[0], -1)


def _read_attention(attention):
    if getattr(attention, "_use_bias", False):
        raise ValueError("Only Model Garden's bias-free attention (use_bias=False, its "
                         "Seq2SeqTransformer default) has a counterpart here.")
    return {"query": _heads(attention._query_dense), "key": _heads(attention._key_dense),
            "value": _heads(attention._value_dense),
            "output": _heads(attention._output_dense, output=True)}


def _read_dense(dense):
    return (_value(dense.kernel), _value(dense.bias))


def read_tf_models_seq2seq(model):
    """The canonical dict of a built Model Garden `Seq2SeqTransformer`."""
    if not model.built or not model.weights:
        raise ValueError("Build the Seq2SeqTransformer first (call it once on inputs "
                         "with targets).")
    encoder = []
    for block in model.encoder_layer.encoder_layers:
        encoder.append({
            "self_attention": _read_attention(block._attention_layer),
            "self_attention_norm": _norm(block._attention_layer_norm),
            "intermediate": _read_dense(block._intermediate_dense),
            "output": _read_dense(block._output_dense),
            "output_norm": _norm(block._output_layer_norm),
        })
    decoder = []
    for block in model.decoder_layer.decoder_layers:
        decoder.append({
            "self_attention": _read_attention(block.self_attention),
            "self_attention_norm": _norm(block.self_attention_layer_norm),
            "cross_attention": _read_attention(block.encdec_attention),
            "cross_attention_norm": _norm(block.encdec_attention_layer_norm),
            "intermediate": _read_dense(block.intermediate_dense),
            "output": _read_dense(block.output_dense),
            "output_norm": _norm(block.output_layer_norm),
        })
    return {
        "embeddings": _value(model.embedding_lookup.embeddings),
        "encoder": encoder,
        "decoder": decoder,
        "encoder_norm": _norm(model.encoder_layer.output_normalization),
        "decoder_norm": _norm(model.decoder_layer.output_normalization),
    }


def read_transformer(backbone):
    """The canonical dict of our `TransformerBackbone`."""

    def self_attention(layer):
        q, k, v = np.split(_value(layer.qkv_dense.kernel), 3, axis=1)
        return {"query": q, "key": k, "value": v, "output": _value(layer.output_dense.kernel)}

    def cross_attention(layer):
        k, v = np.split(_value(layer.key_value_dense.kernel), 2, axis=1)
        return {"query": _value(layer.query_dense.kernel), "key": k, "value": v,
                "output": _value(layer.output_dense.kernel)}

    def block_common(block):
        return {"intermediate": _read_dense(block.intermediate_dense),
                "output": _read_dense(block.output_dense),
                "output_norm": _norm(block.output_layer_norm)}

    encoder = [dict(block_common(b), self_attention=self_attention(b.attention),
                    self_attention_norm=_norm(b.attention_layer_norm))
               for b in backbone.encoder_layers]
    decoder = [dict(block_common(b), self_attention=self_attention(b.self_attention),
                    self_attention_norm=_norm(b.self_attention_layer_norm),
                    cross_attention=cross_attention(b.cross_attention),
                    cross_attention_norm=_norm(b.cross_attention_layer_norm))
               for b in backbone.decoder_layers]
    return {
        "embeddings": _value(backbone.shared_embedding.embeddings),
        "encoder": encoder,
        "decoder": decoder,
        "encoder_norm": _norm(backbone.encoder_norm) if backbone.encoder_norm else None,
        "decoder_norm": _norm(backbone.decoder_norm) if backbone.decoder_norm else None,
    }


def _assign(variable, value):
    if tuple(variable.shape) != tuple(value.shape):
        raise ValueError(f"{variable.path if hasattr(variable, 'path') else variable.name}: "
                         f"shape {tuple(variable.shape)}, the weights have {value.shape}.")
    variable.assign(value.astype("float32"))


def _set_norm(layer, values):
    _assign(layer.gamma, values[0])
    _assign(layer.beta, values[1])


def _set_dense(layer, values):
    _assign(layer.kernel, values[0])
    _assign(layer.bias, values[1])


def set_transformer_weights(backbone, weights):
    """Writes a canonical dict into our `TransformerBackbone`; returns it."""
    if len(weights["encoder"]) != backbone.num_layers or \
            len(weights["decoder"]) != backbone.num_layers:
        raise ValueError(f"The weights have {len(weights['encoder'])} encoder and "
                         f"{len(weights['decoder'])} decoder layers; the backbone has "
                         f"{backbone.num_layers} of each.")
    if (weights["encoder_norm"] is not None) != (backbone.encoder_norm is not None):
        raise ValueError("The weights' layout (final LayerNorms: pre-LN or not) differs "
                         f"from the backbone's norm_first={backbone.norm_first}.")
    _assign(backbone.shared_embedding.embeddings, weights["embeddings"])

    def set_common(block, values):
        _set_dense(block.intermediate_dense, values["intermediate"])
        _set_dense(block.output_dense, values["output"])
        _set_norm(block.output_layer_norm, values["output_norm"])

    def set_self(layer, values):
        _assign(layer.qkv_dense.kernel,
                np.concatenate([values["query"], values["key"], values["value"]], axis=1))
        _assign(layer.output_dense.kernel, values["output"])

    for block, values in zip(backbone.encoder_layers, weights["encoder"]):
        set_self(block.attention, values["self_attention"])
        _set_norm(block.attention_layer_norm, values["self_attention_norm"])
        set_common(block, values)
    for block, values in zip(backbone.decoder_layers, weights["decoder"]):
        set_self(block.self_attention, values["self_attention"])
        _set_norm(block.self_attention_layer_norm, values["self_attention_norm"])
        cross = values["cross_attention"]
        _assign(block.cross_attention.query_dense.kernel, cross["query"])
        _assign(block.cross_attention.key_value_dense.kernel,
                np.concatenate([cross["key"], cross["value"]], axis=1))
        _assign(block.cross_attention.output_dense.kernel, cross["output"])
        _set_norm(block.cross_attention_layer_norm, values["cross_attention_norm"])
        set_common(block, values)
    if backbone.encoder_norm is not None:
        _set_norm(backbone.encoder_norm, weights["encoder_norm"])
        _set_norm(backbone.decoder_norm, weights["decoder_norm"])
    return backbone


def from_tf_models_seq2seq(model, max_sequence_length=1024, dtype=None):
    """Our `TransformerBackbone` with a built Model Garden
    `Seq2SeqTransformer`'s weights (sizes read from the weights' shapes).

    Args:
        model: a built `Seq2SeqTransformer` with Model Garden's
            `TransformerEncoder` / `TransformerDecoder`.
        max_sequence_length: rows of our sinusoid table (Model Garden
            computes any length).
        dtype: our backbone's dtype policy.

    Returns:
        A `TransformerBackbone(norm_first=True, position_encoding=
        "concatenated")` that computes the same logits.
    """
    weights = read_tf_models_seq2seq(model)
    vocabulary_size, hidden = weights["embeddings"].shape
    encoder_layer = model.encoder_layer
    if not getattr(encoder_layer, "_norm_first", True):
        raise ValueError("Model Garden's Seq2SeqTransformer with norm_first=False is not "
                         "supported: its post-LN stacks still end with a LayerNorm.")
    backbone = TransformerBackbone(
        vocabulary_size=int(vocabulary_size), num_layers=len(weights["encoder"]),
        num_heads=int(encoder_layer.num_attention_heads), hidden_dim=int(hidden),
        intermediate_dim=int(weights["encoder"][0]["intermediate"][0].shape[1]),
        dropout=0.0, max_sequence_length=max_sequence_length,
        layer_norm_epsilon=float(encoder_layer._norm_epsilon), norm_first=True,
        position_encoding="concatenated", dtype=dtype)
    return set_transformer_weights(backbone, weights)


def to_tf_models_seq2seq(backbone, model):
    """Writes our pre-LN backbone's weights into a built Model Garden
    `Seq2SeqTransformer` of the same sizes; returns the model."""
    if backbone.encoder_norm is None:
        raise ValueError("Only a norm_first=True backbone has Model Garden's layout.")
    weights = read_transformer(backbone)
    _assign(model.embedding_lookup.embeddings, weights["embeddings"])

    def set_attention(attention, values):
        n_d = tuple(attention._query_dense.kernel.shape[1:])
        for name in ("query", "key", "value"):
            kernel = getattr(attention, f"_{name}_dense").kernel
            _assign(kernel, values[name].reshape((values[name].shape[0],) + n_d))
        _assign(attention._output_dense.kernel,
                values["output"].reshape(tuple(attention._output_dense.kernel.shape)))

    for block, values in zip(model.encoder_layer.encoder_layers, weights["encoder"]):
        set_attention(block._attention_layer, values["self_attention"])
        _set_norm(block._attention_layer_norm, values["self_attention_norm"])
        _set_dense(block._intermediate_dense, values["intermediate"])
        _set_dense(block._output_dense, values["output"])
        _set_norm(block._output_layer_norm, values["output_norm"])
    for block, values in zip(model.decoder_layer.decoder_layers, weights["decoder"]):
        set_attention(block.self_attention, values["self_attention"])
        _set_norm(block.self_attention_layer_norm, values["self_attention_norm"])
        set_attention(block.encdec_attention, values["cross_attention"])
        _set_norm(block.encdec_attention_layer_norm, values["cross_attention_norm"])
        _set_dense(block.intermediate_dense, values["intermediate"])
        _set_dense(block.output_dense, values["output"])
        _set_norm(block.output_layer_norm, values["output_norm"])
    _set_norm(model.encoder_layer.output_normalization, weights["encoder_norm"])
    _set_norm(model.decoder_layer.output_normalization, weights["decoder_norm"])
    return model
