"""`GraphOptions`: how an exported serving graph runs the model, and the
two pieces of graph that carry them out.

    pad_to_longest   the tokenizer packs every row to the exported length T,
                     but most requests are far shorter; the model then runs
                     on the batch's longest row (rounded up to
                     `length_multiple`), not on T. Attention masks padding
                     out exactly (the masked scores underflow to 0 in
                     float32), so the outputs at real positions do not
                     change; token-level outputs are padded back to T.
    jit_compile      the model function (not the tokenizer, whose string
                     ops XLA cannot compile) is an XLA cluster; XLA compiles
                     it once per input shape, so combine it with
                     `pad_to_longest` rounding to bound the shapes.
    precision        "float32", or "bfloat16": the model's weights are
                     stored and multiplied in bfloat16 (softmax and
                     LayerNorm still in float32, every output float32).
                     About 2x the matrix throughput on CPUs with bfloat16
                     kernels (AVX512_BF16, AMX) and GPUs; slower on CPUs
                     without them (`kerasbert hardware`).

Both are recorded in `assets.extra/export.json` ("graph").
"""

import dataclasses

import keras
import tensorflow as tf

from kerasbert.data.finetuning.padding import DEFAULT_MULTIPLE
from kerasbert.data.finetuning.padding import trim_batch
from kerasbert.layers.block_sparse_attention import sparse_threshold

EXPORT_PRECISIONS = ("float32", "bfloat16")


@dataclasses.dataclass(frozen=True)
class GraphOptions:
    """Export options of the serving graph (`kerasbert export` flags).

    Args:
        pad_to_longest: run the model on the batch's longest row, not the
            exported length.
        length_multiple: the finest rounding of that length (training's
            `pad_to_multiple_of`, `kerasbert.data.finetuning.padding`): it
            bounds the distinct shapes an XLA-compiled model sees
            (`shape_bound`: 16 at T = 128 with 8).
        jit_compile: XLA-compile the model function.
        precision: "float32" or "bfloat16" (the model's compute and
            weights; outputs stay float32).
    """

    pad_to_longest: bool = True
    length_multiple: int = DEFAULT_MULTIPLE
    jit_compile: bool = False
    precision: str = "float32"

    def __post_init__(self):
        if int(self.length_multiple) < 1:
            raise ValueError(f"length_multiple must be >= 1, got {self.length_multiple}.")
        if self.precision not in EXPORT_PRECISIONS:
            raise ValueError(f"precision {self.precision!r}: expected one of "
                             f"{EXPORT_PRECISIONS}.")

    def to_config(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_config(cls, config):
        """From `to_config()`'s dict (unknown keys are an error); None or
        an instance pass through as the defaults / themselves."""
        if config is None:
            return cls()
        if isinstance(config, cls):
            return config
        unknown = set(config) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"Unknown graph options: {', '.join(sorted(unknown))}.")
        return cls(**config)


def check_options(options, backbone, sequence_length):
    """The options the backbone can honour exactly (BigBird: full-length padding).

    BigBird's block-sparse attention partitions the sequence into blocks
    and draws random blocks per length: on a shorter input it computes a
    different function, so trimming the padding would change the outputs
    whenever the exported length uses the sparse pattern.
    """
    if not options.pad_to_longest:
        return options
    config = backbone.get_config()
    if config.get("attention", "full") == "bigbird":
        threshold = sparse_threshold(config["block_size"], config["num_random_blocks"])
        if sequence_length > threshold:
            # The sparse pattern depends on the length: keep the full length.
            return dataclasses.replace(options, pad_to_longest=False)
    return options


def trim_padding(features, multiple):
    """Model inputs cut to the batch's longest row, rounded up to
    `multiple` (`kerasbert.data.finetuning.padding.trim_batch`, the same
    cut as training's batches).

    Args:
        features: {"input_word_ids", "input_mask", "input_type_ids"}, int32
            [..., T] (T static), or a text2text encoder's two inputs.
        multiple: the rounding (at most T; at least `multiple`, so an
            all-empty batch keeps a position for [CLS]).

    Returns:
        The same dict cut to [..., L].
    """
    return trim_batch(features, multiple=multiple)[0]


def restore_length(values, full, axis=1):
    """Pads a token-level output [..., L, ...] back to `full` along `axis`
    with zeros (positions the decoding never reads: they are padding)."""
    pad = full - tf.shape(values)[axis]
    paddings = [[0, 0]] * values.shape.rank
    paddings[axis] = [0, pad]
    restored = tf.pad(values, paddings)
    shape = values.shape.as_list()
    shape[axis] = full
    restored.set_shape(shape)
    return restored


def in_precision(model, precision):
    """`model` itself when its dtype policy is `precision`; else a copy
    built from its config under that policy, holding its weights (for
    "bfloat16": stored in bfloat16, half the bytes to read per request and
    no per-call casts; a model fine-tuned in mixed_bfloat16 exports as
    float32 by default). The preprocessor is left out: the serving graph
    has its own tokenizer ops.
    """
    if model.dtype_policy.name == precision:
        return model
    policy = keras.dtype_policies.serialize(keras.dtype_policies.get(precision))
    config = dict(model.get_config())
    config.pop("preprocessor", None)
    config["dtype"] = policy
    if isinstance(config.get("backbone"), dict):
        backbone = dict(config["backbone"])
        backbone["config"] = {**backbone["config"], "dtype": policy}
        config["backbone"] = backbone
    copy = type(model).from_config(config)
    weights = model.get_weights()
    if len(copy.weights) != len(weights):
        raise ValueError(f"A {precision} copy of {type(model).__name__} holds "
                         f"{len(copy.weights)} weights, the model {len(weights)}.")
    for variable, value in zip(copy.weights, weights):
        variable.assign(keras.ops.cast(value, variable.dtype))
    return copy


def model_function(model, jit_compile):
    """features -> the model's inference outputs, as one `tf.function`
    (XLA-compiled with `jit_compile`). A separate function so the saved
    graph holds the model as one call the XLA cluster covers."""

    def forward(features):
        return model(features, training=False)

    return tf.function(forward, jit_compile=bool(jit_compile), autograph=False)
