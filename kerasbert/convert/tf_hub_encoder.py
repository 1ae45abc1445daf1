"""A TF Hub BERT encoder SavedModel -> our backbone with its weights.

Two writers make these directories:

- tf-models-official's `export_tfhub` (and so the published
  `bert_en_uncased_L-12_H-768_A-12` family): the variables carry the
  Model Garden `BertEncoder` names (`MODEL_GARDEN`), and the configuration
  is read from their shapes;
- our `export-hub`: the variables carry our own paths, and
  `assets.extra/kerasbert_backbone.json` names the class and its
  configuration (`BACKBONE_FILE`), so every family comes back exactly.

The variables are read from the restored object (`tf.saved_model.load`),
never by running its functions.
"""

import os
import re

import keras
import numpy as np

from kerasbert.convert.bert_weights import LAYER_KEYS
from kerasbert.convert.bert_weights import set_bert_weights
from kerasbert.errors import UsageError
from kerasbert.sources.source import read_json_file
from kerasbert.models import Backbone
from kerasbert.models import BertBackbone
from kerasbert.layers.initializers import loads_checkpoint
from kerasbert.models.config_checks import check_stored_parameters
from kerasbert.models.config_checks import stored_config_arguments

#: Written by our export-hub beside the warm-up records: {"class_name", "config"}.
BACKBONE_FILE = os.path.join("assets.extra", "kerasbert_backbone.json")

#: canonical key -> Model Garden variable name (outside the blocks).
MODEL_GARDEN = {
    "word_embeddings": "word_embeddings/embeddings",
    "position_embeddings": "position_embedding/embeddings",
    "type_embeddings": "type_embeddings/embeddings",
    "embeddings_ln_gamma": "embeddings/layer_norm/gamma",
    "embeddings_ln_beta": "embeddings/layer_norm/beta",
    "embedding_projection_kernel": "embedding_projection/kernel",
    "embedding_projection_bias": "embedding_projection/bias",
    "pooler_kernel": "pooler_transform/kernel",
    "pooler_bias": "pooler_transform/bias",
}

#: canonical block key -> name under "transformer/layer_<i>/".
MODEL_GARDEN_BLOCK = dict(zip(LAYER_KEYS, (
    "self_attention/query/kernel", "self_attention/query/bias",
    "self_attention/key/kernel", "self_attention/key/bias",
    "self_attention/value/kernel", "self_attention/value/bias",
    "self_attention/attention_output/kernel", "self_attention/attention_output/bias",
    "self_attention_layer_norm/gamma", "self_attention_layer_norm/beta",
    "intermediate/kernel", "intermediate/bias",
    "output/kernel", "output/bias",
    "output_layer_norm/gamma", "output_layer_norm/beta",
)))


def _restored_variables(path):
    import tensorflow as tf  # lazy: only this source needs the SavedModel loader

    try:
        import tensorflow_text  # noqa: F401  (lazy: text ops an encoder may carry)
    except ImportError:
        pass
    try:
        restored = tf.saved_model.load(path)
    except (OSError, ValueError, IndexError, tf.errors.OpError) as err:
        # IndexError: TensorFlow's reader on truncated variables.
        raise UsageError(f"{path}: not a loadable SavedModel ({str(err).splitlines()[0]}).") \
            from None
    variables = getattr(restored, "variables", None)
    if not variables:
        raise UsageError(f"{path}: a SavedModel without variables (not a TF Hub encoder).")
    return {v.name.removesuffix(":0"): v.numpy() for v in variables}


@loads_checkpoint
def from_tf_hub_encoder(path, dtype=None):
    """Our backbone from a TF Hub BERT encoder directory (see module doc).

    Raises:
        UsageError: not a SavedModel, or variables that are neither our
            export's nor Model Garden's BertEncoder's (a few names listed).
    """
    tensors = _restored_variables(path)
    described = os.path.join(path, BACKBONE_FILE)
    if os.path.isfile(described):
        return _from_our_export(path, described, tensors, dtype)
    if MODEL_GARDEN["word_embeddings"] not in tensors:
        raise UsageError(f"{path}: no {MODEL_GARDEN['word_embeddings']} variable; this loader "
                         "reads tf-models-official's BertEncoder exports and kerasbert's "
                         f"export-hub (found e.g. {', '.join(sorted(tensors)[:4])}).")
    return _from_model_garden(path, tensors, dtype)


def _from_our_export(path, described, tensors, dtype):
    spec = read_json_file(described)
    classes = {cls.__name__: cls for cls in _subclasses(Backbone)}
    name = spec.get("class_name") if isinstance(spec, dict) else None
    cls = classes.get(name) if isinstance(name, str) else None
    if cls is None:
        raise UsageError(f"{described}: unknown backbone class {name!r}.")
    if not isinstance(spec.get("config"), dict):
        raise UsageError(f"{described}: \"config\" is not an object of {name}'s arguments.")
    config = dict(spec["config"])
    _check_declared_size(described, cls, config, tensors)
    if dtype is not None:
        config["dtype"] = dtype
    backbone = cls.from_config(config)
    missing = []
    for variable in backbone.variables:
        if variable.path not in tensors:
            if "seed_generator" not in variable.path:
                missing.append(variable.path)
            continue
        value = tensors[variable.path]
        if tuple(variable.shape) != value.shape:
            raise UsageError(f"{path}: {variable.path} has shape {value.shape}, the "
                             f"configuration gives {tuple(variable.shape)}.")
        variable.assign(keras.ops.cast(value, variable.dtype))
    if missing:
        raise UsageError(f"{path}: the SavedModel lacks {len(missing)} variables of "
                         f"{cls.__name__} (e.g. {', '.join(missing[:3])}).")
    return backbone


def _check_declared_size(described, cls, config, tensors):
    """Before the backbone is built from the file's description: its values
    are ones a model can have, and the parameters they declare are stored
    in the SavedModel's variables and fit the memory budget."""
    arguments = stored_config_arguments(cls, config, f"{described}: ")
    if arguments is not None:  # else the constructor names what is missing
        check_stored_parameters(cls, arguments, sum(int(np.size(v)) for v in tensors.values()),
                                f"{described}: ", "the SavedModel stores")


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _activation_from_graph(path):
    """The blocks' activation, read from the ops of the saved functions: an
    Erf op is the erf GELU; Pow (x**3) without Erf is the tanh GELU of the
    original BERT (what Model Garden's "gelu" is); else ReLU."""
    from tensorflow.core.protobuf import saved_model_pb2  # lazy: tensorflow

    saved = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved.ParseFromString(f.read())
    ops = {node.op for graph in saved.meta_graphs
           for function in graph.graph_def.library.function for node in function.node_def}
    if "Erf" in ops:
        return "gelu"
    if "Pow" in ops:
        return "gelu_approximate"
    if "Relu" in ops:
        return "relu"
    raise UsageError(f"{path}: no GELU or ReLU op in the saved functions; cannot tell the "
                     "activation of the blocks.")


def _from_model_garden(path, tensors, dtype):
    layers = sorted({int(m.group(1)) for name in tensors
                     if (m := re.match(r"transformer/layer_(\d+)/", name))})
    if layers != list(range(len(layers))) or not layers:
        raise UsageError(f"{path}: transformer layers {layers} (expected 0..L-1).")
    weights = {key: tensors[name] for key, name in MODEL_GARDEN.items() if name in tensors}
    weights["layers"] = []
    for i in layers:
        block = {}
        for key, name in MODEL_GARDEN_BLOCK.items():
            full = f"transformer/layer_{i}/{name}"
            if full not in tensors:
                raise UsageError(f"{path}: no variable {full}.")
            block[key] = tensors[full]
        hidden = block["query_kernel"].shape[0]
        num_heads = block["query_kernel"].shape[1]
        for key in ("query", "key", "value"):  # [H, N, D] -> [H, N*D]
            block[f"{key}_kernel"] = np.reshape(block[f"{key}_kernel"], (hidden, -1))
            block[f"{key}_bias"] = np.reshape(block[f"{key}_bias"], (-1,))
        block["attention_output_kernel"] = np.reshape(block["attention_output_kernel"],
                                                      (-1, hidden))
        weights["layers"].append(block)
    vocabulary_size, width = weights["word_embeddings"].shape
    backbone = BertBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=len(layers),
        num_heads=num_heads,
        hidden_dim=hidden,
        intermediate_dim=weights["layers"][0]["intermediate_kernel"].shape[1],
        max_sequence_length=weights["position_embeddings"].shape[0],
        num_segments=weights["type_embeddings"].shape[0],
        embedding_dim=width if width != hidden else None,
        activation=_activation_from_graph(path),
        dtype=dtype,
    )
    try:
        return set_bert_weights(backbone, weights)
    except ValueError as err:
        raise UsageError(f"{path}: {err}") from None
