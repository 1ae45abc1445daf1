"""The original google-research/bert TF1 checkpoint and `bert_config.json`.

This is the one place where the TF1 variable names are mapped to the
canonical weight dict (`kerasbert.convert.bert_weights`); the config names
are translated in `kerasbert.convert.bert_config`.

Variable layout (name-based, no object graph); every kernel is [in, out]:

    bert/embeddings/{word_embeddings [V, E], position_embeddings [P, E],
                     token_type_embeddings [S, E], LayerNorm/{gamma,beta} [E]}
    bert/encoder/embedding_hidden_mapping_in/{kernel [E, H], bias [H]}
        (only with a factorised embedding, E != H; ALBERT's name)
    bert/encoder/layer_{i}/attention/self/{query,key,value}/{kernel,bias}
    bert/encoder/layer_{i}/attention/output/dense/{kernel,bias}
    bert/encoder/layer_{i}/attention/output/LayerNorm/{gamma,beta}
    bert/encoder/layer_{i}/intermediate/dense/{kernel [H, I], bias [I]}
    bert/encoder/layer_{i}/output/dense/{kernel [I, H], bias [H]}
    bert/encoder/layer_{i}/output/LayerNorm/{gamma,beta}
    bert/pooler/dense/{kernel [H, H], bias [H]}
    cls/predictions/transform/dense/{kernel [H, E], bias [E]}
    cls/predictions/transform/LayerNorm/{gamma,beta} [E]
    cls/predictions/output_bias [V]
    cls/seq_relationship/output_weights [2, H]  (transposed: [out, in])
    cls/seq_relationship/output_bias [2]

Only BERT's per-layer names are read: ALBERT's shared-layer checkpoints
(`bert/encoder/transformer/group_0/...`) are a different layout.
"""

import json
import math
import os
import uuid

import numpy as np

from kerasbert.convert.bert_config import bert_config_to_kwargs
from kerasbert.convert.bert_config import kwargs_to_bert_config
from kerasbert.convert.bert_weights import LAYER_KEYS
from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.bert_weights import set_bert_weights
from kerasbert.errors import CheckpointError
from kerasbert.layers.initializers import loads_checkpoint

# --------------------------------------------------------------------------
# TF1 names <-> canonical dict
# --------------------------------------------------------------------------

_TOP_NAMES = {
    "word_embeddings": "bert/embeddings/word_embeddings",
    "position_embeddings": "bert/embeddings/position_embeddings",
    "type_embeddings": "bert/embeddings/token_type_embeddings",
    "embeddings_ln_gamma": "bert/embeddings/LayerNorm/gamma",
    "embeddings_ln_beta": "bert/embeddings/LayerNorm/beta",
    "embedding_projection_kernel": "bert/encoder/embedding_hidden_mapping_in/kernel",
    "embedding_projection_bias": "bert/encoder/embedding_hidden_mapping_in/bias",
    "pooler_kernel": "bert/pooler/dense/kernel",
    "pooler_bias": "bert/pooler/dense/bias",
}
_LAYER_NAMES = {
    "query_kernel": "attention/self/query/kernel",
    "query_bias": "attention/self/query/bias",
    "key_kernel": "attention/self/key/kernel",
    "key_bias": "attention/self/key/bias",
    "value_kernel": "attention/self/value/kernel",
    "value_bias": "attention/self/value/bias",
    "attention_output_kernel": "attention/output/dense/kernel",
    "attention_output_bias": "attention/output/dense/bias",
    "attention_ln_gamma": "attention/output/LayerNorm/gamma",
    "attention_ln_beta": "attention/output/LayerNorm/beta",
    "intermediate_kernel": "intermediate/dense/kernel",
    "intermediate_bias": "intermediate/dense/bias",
    "output_kernel": "output/dense/kernel",
    "output_bias": "output/dense/bias",
    "output_ln_gamma": "output/LayerNorm/gamma",
    "output_ln_beta": "output/LayerNorm/beta",
}
assert set(_LAYER_NAMES) == set(LAYER_KEYS)

MLM_NAMES = {
    "transform_kernel": "cls/predictions/transform/dense/kernel",
    "transform_bias": "cls/predictions/transform/dense/bias",
    "ln_gamma": "cls/predictions/transform/LayerNorm/gamma",
    "ln_beta": "cls/predictions/transform/LayerNorm/beta",
    "output_bias": "cls/predictions/output_bias",
}
NSP_NAMES = {
    "output_weights": "cls/seq_relationship/output_weights",
    "output_bias": "cls/seq_relationship/output_bias",
}


def _layer_name(i, key):
    return f"bert/encoder/layer_{i}/{_LAYER_NAMES[key]}"


def expected_shapes(kwargs):
    """TF1 variable name -> shape implied by BertBackbone kwargs (encoder only)."""
    v, h = kwargs["vocabulary_size"], kwargs["hidden_dim"]
    e = kwargs.get("embedding_dim") or h
    i_dim = kwargs["intermediate_dim"]
    shapes = {
        _TOP_NAMES["word_embeddings"]: (v, e),
        _TOP_NAMES["position_embeddings"]: (kwargs.get("max_sequence_length", 512), e),
        _TOP_NAMES["embeddings_ln_gamma"]: (e,),
        _TOP_NAMES["embeddings_ln_beta"]: (e,),
        _TOP_NAMES["pooler_kernel"]: (h, h),
        _TOP_NAMES["pooler_bias"]: (h,),
    }
    segments = kwargs.get("num_segments", 2)
    if segments:
        shapes[_TOP_NAMES["type_embeddings"]] = (segments, e)
    if e != h:
        shapes[_TOP_NAMES["embedding_projection_kernel"]] = (e, h)
        shapes[_TOP_NAMES["embedding_projection_bias"]] = (h,)
    per_layer = {
        "intermediate_kernel": (h, i_dim),
        "intermediate_bias": (i_dim,),
        "output_kernel": (i_dim, h),
    }
    for i in range(kwargs["num_layers"]):
        for key in LAYER_KEYS:
            default = (h, h) if key.endswith("kernel") else (h,)
            shapes[_layer_name(i, key)] = per_layer.get(key, default)
    return shapes


def canonical_to_tf1(weights):
    """Canonical dict -> {TF1 name: array} (encoder variables only)."""
    out = {}
    for key, name in _TOP_NAMES.items():
        if weights.get(key) is not None:
            out[name] = np.asarray(weights[key])
    for i, layer in enumerate(weights["layers"]):
        for key in LAYER_KEYS:
            out[_layer_name(i, key)] = np.asarray(layer[key])
    return out


def tf1_to_canonical(tensors, num_layers):
    """{TF1 name: array} -> canonical dict; absent optional entries are None."""
    weights = {key: tensors.get(name) for key, name in _TOP_NAMES.items()}
    weights["layers"] = [
        {key: tensors[_layer_name(i, key)] for key in LAYER_KEYS}
        for i in range(num_layers)
    ]
    return weights


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


def _normalise_prefix(ckpt_prefix):
    """Accepts a prefix, a file of the bundle, or a directory holding one."""
    import tensorflow as tf

    prefix = os.fspath(ckpt_prefix)
    for suffix in (".index", ".meta"):
        if prefix.endswith(suffix):
            prefix = prefix[: -len(suffix)]
    if ".data-" in os.path.basename(prefix):
        prefix = prefix[: prefix.rindex(".data-")]
    if os.path.isdir(prefix):
        latest = tf.train.latest_checkpoint(prefix)
        indexes = sorted(f for f in os.listdir(prefix) if f.endswith(".index"))
        if latest is None and len(indexes) == 1:
            latest = os.path.join(prefix, indexes[0][: -len(".index")])
        if latest is None:
            raise FileNotFoundError(
                f"Directory {prefix!r} holds {len(indexes)} checkpoints "
                f"({indexes[:5]}); pass the prefix, e.g. .../bert_model.ckpt."
            )
        prefix = latest
    if not os.path.exists(prefix + ".index"):
        raise FileNotFoundError(
            f"TF1 checkpoint {prefix!r} not found: expected "
            f"{prefix + '.index'!r} and {prefix + '.data-00000-of-00001'!r}."
        )
    return prefix


class _Checkpoint:
    """A `tf.train.load_checkpoint` reader whose errors name the file."""

    def __init__(self, ckpt_prefix):
        import tensorflow as tf

        self.prefix = _normalise_prefix(ckpt_prefix)
        try:
            self._reader = tf.train.load_checkpoint(self.prefix)
        except tf.errors.OpError as error:
            raise ValueError(
                f"Cannot read TF1 checkpoint {self.prefix!r}: {error.message}"
            ) from None
        self.shapes = {
            name: tuple(shape)
            for name, shape in self._reader.get_variable_to_shape_map().items()
        }

    def require(self, expected, hint=""):
        """Checks names and shapes; raises ValueError listing what is off."""
        missing = [n for n in expected if n not in self.shapes]
        if missing:
            raise ValueError(
                f"TF1 checkpoint {self.prefix!r} lacks {len(missing)} "
                f"variable(s), e.g. {missing[:5]}.{hint}"
            )
        for name, shape in expected.items():
            if self.shapes[name] != tuple(shape):
                raise ValueError(
                    f"TF1 checkpoint {self.prefix!r}: variable {name!r} has "
                    f"shape {self.shapes[name]}, the config expects "
                    f"{tuple(shape)}.{hint}"
                )

    def read(self, names):
        import tensorflow as tf

        out = {}
        for name in names:
            try:
                out[name] = np.asarray(self._reader.get_tensor(name), "float32")
            except (tf.errors.OpError, IndexError) as error:
                # A truncated shard is an IndexError ("Read less bytes than
                # requested") from TensorFlow's reader.
                raise ValueError(
                    f"Cannot read {name!r} from TF1 checkpoint "
                    f"{self.prefix!r} (missing or corrupt .data-* shard?): "
                    f"{getattr(error, 'message', error)}"
                ) from None
        return out


def _check_declared_size(kwargs, ckpt):
    """Before the model is built: the parameters the config declares must
    be stored in the checkpoint and fit the memory budget
    (`check_stored_parameters`)."""
    from kerasbert.models import BertBackbone  # lazy: keras
    from kerasbert.models.config_checks import check_stored_parameters

    check_stored_parameters(BertBackbone, kwargs,
                            sum(math.prod(shape) for shape in ckpt.shapes.values()),
                            "bert_config.json: ", f"TF1 checkpoint {ckpt.prefix!r} stores")


@loads_checkpoint
def load_bert_checkpoint(ckpt_prefix, bert_config_json, dtype=None):
    """Builds a `BertBackbone` from an original BERT checkpoint.

    Args:
        ckpt_prefix: e.g. ".../uncased_L-12_H-768_A-12/bert_model.ckpt" (the
            files are bert_model.ckpt.index / .data-00000-of-00001).
        bert_config_json: path to `bert_config.json`, or its dict.
        dtype: optional dtype policy for the backbone (e.g. "mixed_float16").

    Returns:
        A BertBackbone whose `sequence_output` / `pooled_output` equal the
        original model's `get_sequence_output()` / `get_pooled_output()`.

    Raises:
        FileNotFoundError: missing checkpoint or config.
        ValueError: missing variables (a few listed) or a shape that differs
            from the config (name, checkpoint shape, expected shape).
    """
    from kerasbert.models import BertBackbone  # lazy: keras

    kwargs = bert_config_to_kwargs(bert_config_json)
    ckpt = _Checkpoint(ckpt_prefix)
    stored_layers = 0
    while _layer_name(stored_layers, "query_kernel") in ckpt.shapes:
        stored_layers += 1
    if 0 < kwargs["num_layers"] < stored_layers:
        # Loading the first N layers of a deeper model would give a model
        # the config does not describe, silently.
        raise CheckpointError(
            f"the config says num_hidden_layers={kwargs['num_layers']} but TF1 checkpoint "
            f"{ckpt.prefix!r} holds {stored_layers} layers: the config is not this model's.")
    # Names are listed up to the first layer the checkpoint lacks (a config
    # of 10^9 layers would otherwise exhaust memory listing them).
    expected = expected_shapes(
        {**kwargs, "num_layers": min(kwargs["num_layers"], stored_layers + 1)})
    hint = ""
    mapping = _TOP_NAMES["embedding_projection_kernel"]
    if mapping in ckpt.shapes and mapping not in expected:
        hint = (
            f" The checkpoint has {mapping} (factorised embedding): set "
            "embedding_size in the config."
        )
    ckpt.require(expected, hint=f" Is the config from the same model?{hint}")
    _check_declared_size(kwargs, ckpt)
    weights = tf1_to_canonical(ckpt.read(expected), kwargs["num_layers"])
    backbone = BertBackbone(**kwargs, dtype=dtype)
    return set_bert_weights(backbone, weights)


def load_pretraining_heads(ckpt_prefix, backbone):
    """Builds the MLM and NSP heads from `cls/*` in an original checkpoint.

    The MLM decoder is tied to `backbone.token_embedding` (load the backbone
    from the same checkpoint so it holds bert/embeddings/word_embeddings).

    Returns:
        (MaskedLMHead, NextSentenceHead): logits [B, P, V] and [B, 2].
    """
    from kerasbert.layers import MaskedLMHead  # lazy: keras
    from kerasbert.layers import NextSentenceHead  # lazy: keras

    ckpt = _Checkpoint(ckpt_prefix)
    hidden = backbone.hidden_dim
    width = backbone.token_embedding.output_dim
    vocab = backbone.vocabulary_size
    nsp_classes = ckpt.shapes.get(NSP_NAMES["output_bias"], (2,))[0]
    expected = {
        MLM_NAMES["transform_kernel"]: (hidden, width),
        MLM_NAMES["transform_bias"]: (width,),
        MLM_NAMES["ln_gamma"]: (width,),
        MLM_NAMES["ln_beta"]: (width,),
        MLM_NAMES["output_bias"]: (vocab,),
        NSP_NAMES["output_weights"]: (nsp_classes, hidden),
        NSP_NAMES["output_bias"]: (nsp_classes,),
    }
    ckpt.require(
        expected, hint=" (pretraining heads; fine-tuned checkpoints lack them)"
    )
    t = ckpt.read(expected)

    mlm = MaskedLMHead.tied_to(backbone, name="masked_lm_head")
    mlm.dense.kernel.assign(t[MLM_NAMES["transform_kernel"]])
    mlm.dense.bias.assign(t[MLM_NAMES["transform_bias"]])
    mlm.layer_norm.gamma.assign(t[MLM_NAMES["ln_gamma"]])
    mlm.layer_norm.beta.assign(t[MLM_NAMES["ln_beta"]])
    mlm.output_bias.assign(t[MLM_NAMES["output_bias"]])

    nsp = NextSentenceHead(
        num_classes=nsp_classes,
        initializer_range=backbone.initializer_range,
        dtype=backbone.dtype_policy,
        name="next_sentence_head",
    )
    nsp.build((None, hidden))
    # TF1 stores [classes, H] and computes pooled @ W^T; Dense wants [H, classes].
    nsp.dense.kernel.assign(t[NSP_NAMES["output_weights"]].T)
    nsp.dense.bias.assign(t[NSP_NAMES["output_bias"]])
    return mlm, nsp


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------


def _head_tensors(backbone, masked_lm_head, next_sentence_head):
    out = {}
    if masked_lm_head is not None:
        if masked_lm_head.token_embedding is not backbone.token_embedding:
            raise ValueError(
                "The TF1 layout ties the MLM decoder to "
                "bert/embeddings/word_embeddings; this MaskedLMHead is not "
                "tied to the backbone's token_embedding."
            )
        out[MLM_NAMES["transform_kernel"]] = masked_lm_head.dense.kernel.numpy()
        out[MLM_NAMES["transform_bias"]] = masked_lm_head.dense.bias.numpy()
        out[MLM_NAMES["ln_gamma"]] = masked_lm_head.layer_norm.gamma.numpy()
        out[MLM_NAMES["ln_beta"]] = masked_lm_head.layer_norm.beta.numpy()
        out[MLM_NAMES["output_bias"]] = masked_lm_head.output_bias.numpy()
    if next_sentence_head is not None:
        out[NSP_NAMES["output_weights"]] = next_sentence_head.dense.kernel.numpy().T
        out[NSP_NAMES["output_bias"]] = next_sentence_head.dense.bias.numpy()
    return out


def _write_bundle(prefix, tensors):
    """Writes {name: array} as a V2 tensor bundle: prefix.index + .data-*."""
    import tensorflow as tf

    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(tensors[n]) for n in names],
    )


def _rename(src, dst):
    import tensorflow as tf

    tf.io.gfile.rename(src, dst, overwrite=True)


def _publish(pairs):
    """Moves each (temporary, final) file into place, all or nothing.

    Files already at a final name are first moved aside and put back if any
    move fails, so a failed save never loses or corrupts an older checkpoint.
    The `.index` must come last in `pairs`: readers look for it first.
    """
    import tensorflow as tf

    token = uuid.uuid4().hex[:8]
    backups, placed = [], []
    try:
        for _, final in pairs:
            if tf.io.gfile.exists(final):
                backup = f"{final}.old-{token}"
                _rename(final, backup)
                backups.append((backup, final))
        for tmp, final in pairs:
            _rename(tmp, final)
            placed.append(final)
    except BaseException:
        for final in placed:
            tf.io.gfile.remove(final)
        for backup, final in backups:
            _rename(backup, final)
        raise
    for backup, _ in backups:
        tf.io.gfile.remove(backup)


def save_bert_checkpoint(
    backbone, ckpt_prefix, masked_lm_head=None, next_sentence_head=None
):
    """Writes `backbone` (and heads) in the original BERT TF1 layout.

    Writes `<ckpt_prefix>.index`, `<ckpt_prefix>.data-00000-of-00001` and
    `bert_config.json` in the same directory. The files are readable by
    `tf.train.load_checkpoint`, by a TF1 `tf.compat.v1.train.Saver` restore
    and by `load_bert_checkpoint`.

    Everything is written under a temporary prefix first and renamed into
    place only after the whole write succeeded; on failure no file with the
    final prefix is left (an older checkpoint there is kept).

    Returns:
        ckpt_prefix (str).
    """
    import tensorflow as tf

    prefix = os.fspath(ckpt_prefix)
    directory = os.path.dirname(prefix) or "."
    # Translate everything before touching the disk, so bad input writes nothing.
    config = kwargs_to_bert_config(backbone)
    tensors = canonical_to_tf1(get_bert_weights(backbone))
    tensors.update(_head_tensors(backbone, masked_lm_head, next_sentence_head))

    tf.io.gfile.makedirs(directory)
    tmp = os.path.join(directory, f".{os.path.basename(prefix)}.tmp-{uuid.uuid4().hex}")
    config_path = os.path.join(directory, "bert_config.json")
    try:
        _write_bundle(tmp, tensors)
        with tf.io.gfile.GFile(tmp + ".json", "w") as f:
            f.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
        data = sorted(tf.io.gfile.glob(tmp + ".data-*"))
        pairs = [(p, prefix + p[len(tmp):]) for p in data]
        pairs += [(tmp + ".json", config_path), (tmp + ".index", prefix + ".index")]
        _publish(pairs)
    finally:
        for leftover in tf.io.gfile.glob(tmp + "*"):
            tf.io.gfile.remove(leftover)
    return prefix
