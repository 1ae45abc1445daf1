"""tf-models-official (Model Garden) `BertEncoder` -> kerasbert `BertBackbone`.

Both Model Garden encoders are accepted: `official.nlp.modeling.networks.
BertEncoder` (a functional tf_keras.Model, list or dict outputs) and
`BertEncoderV2` (a tf_keras Layer, dict outputs). They own the same layers:

    word_embeddings [V, E], position_embedding [P, E], type_embeddings [S, E],
    embeddings/layer_norm [E], embedding_projection [E, H] (only when E != H),
    transformer/layer_i/self_attention/{query,key,value} kernel [H, N, D],
        bias [N, D]; attention_output kernel [N, D, H], bias [H],
    self_attention_layer_norm, intermediate [H, I], output [I, H],
    output_layer_norm, pooler_transform [H, H].

Model Garden sums the embeddings, normalises over E, applies dropout and
only then projects E -> H; `BertEmbeddings` does the same in the same order,
so factorised embeddings convert exactly.

Sizes are read from the variables' shapes (the source of truth); the config is
read only for what the shapes cannot tell (activation, norm_first,
output_range, dropout).
"""

import math
import os
import warnings

import numpy as np

from kerasbert.convert.bert_weights import set_bert_weights

# Points where erf GELU and tanh GELU differ by up to ~5e-4, far above the
# float32 rounding of either, so the two forms are told apart reliably.
_PROBE = np.array(
    [-4.0, -3.0, -2.0, -1.5, -1.0, -0.5, -0.1, 0.0, 0.3, 0.7, 1.0, 2.0, 3.5],
    dtype="float32",
)


def _reference_activations():
    erf = np.vectorize(math.erf)
    x = _PROBE.astype("float64")
    tanh_cdf = 0.5 * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))
    return {
        "gelu": x * 0.5 * (1.0 + erf(x / np.sqrt(2.0))),
        "gelu_approximate": x * tanh_cdf,
        "relu": np.maximum(x, 0.0),
    }


def detect_activation(fn):
    """Names a callable activation by evaluating it.

    Model Garden stores activations as callables (its default is an anonymous
    lambda around the tanh GELU), so names are unreliable; values are not.

    Returns:
        "gelu" (erf form), "gelu_approximate" (tanh form) or "relu".

    Raises:
        ValueError: the function matches none of them.
    """
    import tensorflow as tf

    got = np.asarray(fn(tf.constant(_PROBE)), dtype="float64")
    for name, want in _reference_activations().items():
        if np.max(np.abs(got - want)) < 1e-5:
            return name
    raise ValueError(
        f"Unsupported activation {getattr(fn, '__name__', fn)!r}: it matches "
        "neither erf GELU, tanh GELU nor ReLU on probe points; BertBackbone "
        "cannot reproduce it."
    )


def _is_tf_models_encoder(encoder):
    from official.nlp.modeling import networks

    return isinstance(encoder, (networks.BertEncoder, networks.BertEncoderV2))


def _ensure_built(encoder):
    # BertEncoderV2 is a Layer that creates its variables on first call.
    if encoder.built and encoder.weights:
        return
    import tensorflow as tf

    ids = tf.zeros((1, 2), tf.int32)
    encoder(
        dict(input_word_ids=ids, input_mask=tf.ones_like(ids), input_type_ids=ids)
    )


# Block settings BertEncoder never changes; a subclass or hand-built encoder
# that does would compute something else, so each one is checked.
_BLOCK_DEFAULTS = {
    "norm_first": False,
    "use_bias": True,
    "use_query_residual": True,
    "use_rms_norm": False,
    "output_last_dim": None,
    "diff_q_kv_att_layer_norm": False,
    "num_kv_heads": None,
    "linformer_dim": None,
    "use_sigmoid_attn": False,
    "output_range": None,
}


def _check_supported(encoder):
    """Raises ValueError naming the first setting BertBackbone cannot match."""
    config = encoder.get_config()
    if config.get("norm_first"):
        raise ValueError(
            "Unsupported Model Garden encoder: norm_first=True (pre-LayerNorm "
            "blocks); BertBackbone is post-LayerNorm."
        )
    if config.get("output_range") is not None:
        raise ValueError(
            f"Unsupported Model Garden encoder: output_range="
            f"{config['output_range']}; BertBackbone always returns the full "
            "sequence. Rebuild the encoder with output_range=None."
        )
    if config.get("with_dense_inputs"):
        raise ValueError(
            "Unsupported Model Garden encoder: with_dense_inputs=True."
        )
    from official.nlp.modeling.layers import OnDeviceEmbedding

    word = encoder.get_embedding_layer()
    if not isinstance(word, OnDeviceEmbedding) or word.get_config().get(
        "scale_factor"
    ):
        raise ValueError(
            "Unsupported Model Garden encoder: a custom embedding_layer "
            f"({type(word).__name__}, config {word.get_config()}); only the "
            "default unscaled OnDeviceEmbedding converts."
        )
    for i, block in enumerate(encoder.transformer_layers):
        block_config = block.get_config()
        for key, expected in _BLOCK_DEFAULTS.items():
            if key in block_config and block_config[key] != expected:
                raise ValueError(
                    f"Unsupported Model Garden encoder: transformer layer {i} "
                    f"has {key}={block_config[key]!r} (BertBackbone needs "
                    f"{expected!r})."
                )
        epsilon = block_config.get("norm_epsilon", 1e-12)
        if abs(epsilon - 1e-12) > 1e-15:
            raise ValueError(
                f"Unsupported Model Garden encoder: transformer layer {i} has "
                f"norm_epsilon={epsilon}; the embedding LayerNorm uses 1e-12 "
                "and BertBackbone shares one epsilon."
            )


def _block_activation(encoder):
    names = {
        detect_activation(block._intermediate_activation_layer.activation)
        for block in encoder.transformer_layers
    }
    if len(names) != 1:
        raise ValueError(
            f"Unsupported Model Garden encoder: layers use different "
            f"activations {sorted(names)}."
        )
    return names.pop()


def tf_models_to_canonical(encoder):
    """Reads a Model Garden BertEncoder(V2) into the canonical weight dict."""
    _ensure_built(encoder)

    def value(variable):
        return variable.numpy()

    hidden = encoder.pooler_layer.kernel.shape[-1]
    weights = {
        "word_embeddings": value(encoder.get_embedding_table()),
        "position_embeddings": value(
            encoder._position_embedding_layer._position_embeddings
        ),
        "type_embeddings": value(encoder._type_embedding_layer.embeddings),
        "embeddings_ln_gamma": value(encoder._embedding_norm_layer.gamma),
        "embeddings_ln_beta": value(encoder._embedding_norm_layer.beta),
        "pooler_kernel": value(encoder.pooler_layer.kernel),
        "pooler_bias": value(encoder.pooler_layer.bias),
        "layers": [],
    }
    # V1 sets `_embedding_projection` only when it exists; V2 sets it to None.
    projection = getattr(encoder, "_embedding_projection", None)
    if projection is not None:
        weights["embedding_projection_kernel"] = value(projection.kernel)
        weights["embedding_projection_bias"] = value(projection.bias)
    for block in encoder.transformer_layers:
        attn = block._attention_layer

        def heads_in(dense):  # kernel [H, N, D] -> [H, N*D], bias -> [N*D]
            return (
                np.reshape(value(dense.kernel), (hidden, -1)),
                np.reshape(value(dense.bias), (-1,)),
            )

        qk, qb = heads_in(attn._query_dense)
        kk, kb = heads_in(attn._key_dense)
        vk, vb = heads_in(attn._value_dense)
        out = attn._output_dense
        weights["layers"].append(
            {
                "query_kernel": qk,
                "query_bias": qb,
                "key_kernel": kk,
                "key_bias": kb,
                "value_kernel": vk,
                "value_bias": vb,
                # [N, D, H] -> [N*D, H]: rows are head-major, like the columns.
                "attention_output_kernel": np.reshape(
                    value(out.kernel), (-1, hidden)
                ),
                "attention_output_bias": value(out.bias),
                "attention_ln_gamma": value(block._attention_layer_norm.gamma),
                "attention_ln_beta": value(block._attention_layer_norm.beta),
                "intermediate_kernel": value(block._intermediate_dense.kernel),
                "intermediate_bias": value(block._intermediate_dense.bias),
                "output_kernel": value(block._output_dense.kernel),
                "output_bias": value(block._output_dense.bias),
                "output_ln_gamma": value(block._output_layer_norm.gamma),
                "output_ln_beta": value(block._output_layer_norm.beta),
            }
        )
    return weights


def from_tf_models(encoder):
    """Converts a Model Garden `BertEncoder` / `BertEncoderV2` to `BertBackbone`.

    The converted backbone takes the same dict inputs (`input_word_ids`,
    `input_mask`, `input_type_ids`, int32 [B, T]) and returns the same
    `sequence_output` [B, T, H] and `pooled_output` [B, H] to float32
    rounding. The activation is detected from the encoder's function:
    Model Garden's default (tanh GELU) becomes "gelu_approximate", erf GELU
    becomes "gelu".

    Raises:
        TypeError: not a Model Garden BERT encoder.
        ValueError: a setup BertBackbone cannot reproduce (norm_first,
            output_range, custom embedding layer, other activations, ...).
    """
    from kerasbert.models import BertBackbone  # lazy: keras

    if not _is_tf_models_encoder(encoder):
        raise TypeError(
            "from_tf_models expects official.nlp.modeling.networks."
            f"BertEncoder or BertEncoderV2, got {type(encoder).__name__}."
        )
    _ensure_built(encoder)
    _check_supported(encoder)
    activation = _block_activation(encoder)
    config = encoder.get_config()
    weights = tf_models_to_canonical(encoder)

    vocab, width = weights["word_embeddings"].shape
    hidden = weights["pooler_kernel"].shape[-1]
    dropout = config.get("output_dropout", 0.1)
    if config.get("attention_dropout", dropout) != dropout:
        warnings.warn(
            f"Model Garden encoder has output_dropout={dropout} and "
            f"attention_dropout={config['attention_dropout']}; BertBackbone "
            f"has one rate and uses {dropout} for both (inference is "
            "unaffected).",
            stacklevel=2,
        )
    first = weights["layers"][0] if weights["layers"] else None
    ours = BertBackbone(
        vocabulary_size=vocab,
        num_layers=len(weights["layers"]),
        num_heads=config["num_attention_heads"],
        hidden_dim=hidden,
        intermediate_dim=(
            first["intermediate_kernel"].shape[-1]
            if first is not None
            else config["inner_dim"]
        ),
        max_sequence_length=weights["position_embeddings"].shape[0],
        num_segments=weights["type_embeddings"].shape[0],
        dropout=dropout,
        embedding_dim=width if width != hidden else None,
        activation=activation,
    )
    return set_bert_weights(ours, weights)


def _resolve_checkpoint(path):
    import tensorflow as tf

    path = os.fspath(path)
    if os.path.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(
                f"No TF2 checkpoint in directory {path!r} (no 'checkpoint' "
                "state file); pass the checkpoint prefix, e.g. "
                f"{os.path.join(path, 'ckpt-1')!r}."
            )
        return latest
    if not os.path.exists(path + ".index"):
        raise FileNotFoundError(
            f"TF2 checkpoint {path!r} not found: expected {path + '.index'!r} "
            "and its .data-* shards."
        )
    return path


def _checkpoint_root(root, encoder):
    """Wraps `encoder` so it sits at `root` ("encoder", "model.encoder", ...)
    in the object graph, as it did when the checkpoint was written."""
    import tensorflow as tf

    parts = root.split(".")
    node = encoder
    for name in reversed(parts[1:]):
        node = tf.train.Checkpoint(**{name: node})
    return tf.train.Checkpoint(**{parts[0]: node})


def _top_level_objects(path):
    import tensorflow as tf

    return sorted(
        {
            name.split("/")[0]
            for name, _ in tf.train.list_variables(path)
            if name != "_CHECKPOINTABLE_OBJECT_GRAPH"
        }
    )


def _checkpoint_num_layers(path, root):
    """Counts `_transformer_layers` children of the object at `root` in the
    checkpoint's object graph, or None when the graph has no such node.

    Restoring into an encoder with fewer layers than the file silently skips
    the extra ones, so the count is compared with `num_layers`.
    """
    import tensorflow as tf
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    reader = tf.train.load_checkpoint(path)
    if not reader.has_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"):
        return None
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    node = 0
    for name in root.split(".") + ["_transformer_layers"]:
        ids = [c.node_id for c in graph.nodes[node].children if c.local_name == name]
        if not ids:
            return None
        node = ids[0]
    return len(graph.nodes[node].children)


def from_tf_models_checkpoint(
    checkpoint_path, encoder_config, root="encoder", encoder_class=None
):
    """Restores a Model Garden TF2 checkpoint and converts it.

    Args:
        checkpoint_path: prefix of a `tf.train.Checkpoint` (.../ckpt-1; the
            files are ckpt-1.index and ckpt-1.data-*), or a directory holding
            a `checkpoint` state file.
        encoder_config: dict of Model Garden BertEncoder kwargs (vocab_size,
            hidden_size, num_layers, ...), as used when training.
        root: where the encoder sits in the checkpoint's object graph: the
            keyword it was saved under, e.g. "encoder" for
            `tf.train.Checkpoint(encoder=enc)`, "model" for
            `tf.train.Checkpoint(model=enc)`; dots go deeper
            ("model.encoder_network").
        encoder_class: the Model Garden class to build (default
            `networks.BertEncoder`). Either class restores the other's
            checkpoints: both track their layers under the same attribute
            names (`_embedding_layer`, `_transformer_layers`, ...).

    Raises:
        FileNotFoundError: no checkpoint at `checkpoint_path`.
        ValueError: nothing under `root` matches the encoder, a shape in the
            file differs from `encoder_config`, or the encoder is an
            unsupported setup.
    """
    import tensorflow as tf

    path = _resolve_checkpoint(checkpoint_path)
    if encoder_class is None:
        from official.nlp.modeling import networks

        encoder_class = networks.BertEncoder
    encoder = encoder_class(**encoder_config)
    _ensure_built(encoder)
    try:
        status = _checkpoint_root(root, encoder).read(path)
    except (ValueError, tf.errors.OpError) as error:
        # TF names the variable and both shapes; add the file and the cause.
        raise ValueError(
            f"Checkpoint {path!r} does not fit encoder_config "
            f"{encoder_config}: {error}"
        ) from None
    status.expect_partial()  # Optimizer slots etc. may be left unread.
    try:
        status.assert_existing_objects_matched()
        # A root that matched nothing passes the check above vacuously for
        # some graphs; require that variables actually came from the file.
        status.assert_nontrivial_match()
    except AssertionError as error:
        raise ValueError(
            f"Checkpoint {path!r} holds no {encoder_class.__name__} matching "
            f"encoder_config under root={root!r} (top-level objects in the "
            f"file: {_top_level_objects(path)}). Check `root`, "
            f"`encoder_class` and encoder_config. Detail: {str(error)[:300]}"
        ) from None
    stored = _checkpoint_num_layers(path, root)
    built = len(encoder.transformer_layers)
    if stored is not None and stored != built:
        raise ValueError(
            f"Checkpoint {path!r} has {stored} transformer layers under "
            f"root={root!r}, encoder_config builds {built} (num_layers)."
        )
    return from_tf_models(encoder)

