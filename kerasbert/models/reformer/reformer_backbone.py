"""Reformer (Kitaev, Kaiser & Levskaya, 2020): LSH and local attention in
reversible layers, for very long sequences."""

import keras
from keras import ops

from kerasbert.layers import ChunkedFeedForward
from kerasbert.layers import FastDropout
from kerasbert.layers import LocalSelfAttention
from kerasbert.layers import LSHSelfAttention
from kerasbert.layers import PreNormBranch
from kerasbert.layers import ReversibleSequence
from kerasbert.models.backbone import Backbone
from kerasbert.models.config_checks import ConfigError
from kerasbert.models.gpt.gpt_backbone import last_token_state

ATTENTION_KINDS = ("lsh", "local")


def layer_kinds(attention_layers, num_layers):
    """The attention of each layer: `attention_layers` repeated to
    num_layers entries ("local", "lsh" -> local, lsh, local, lsh, ...; a
    list of num_layers names is used as it is)."""
    kinds = list(attention_layers)
    if not kinds or any(k not in ATTENTION_KINDS for k in kinds):
        raise ConfigError(f"attention_layers={kinds!r}: each entry must be one of "
                          f"{', '.join(ATTENTION_KINDS)}.")
    return [kinds[i % len(kinds)] for i in range(num_layers)]


@keras.saving.register_keras_serializable(package="kerasbert")
class ReformerBackbone(Backbone):
    """The Reformer: attention in O(T log T), training memory flat in depth.

    Token embeddings plus position embeddings (axial, a factorised table,
    when `axial_shape` is set, else one learned row per position), summed
    without LayerNorm, then `num_layers` reversible layers on two streams
    (x1, x2), both starting as the embedding (`ReversibleSequence`):

        x1 <- x1 + Attention(LayerNorm(x2))      LSH or local, per layer
        x2 <- x2 + FeedForward(LayerNorm(x1))    chunked along T

    and `sequence_output` = LayerNorm(concat(x1, x2)), 2 * hidden_dim wide
    (`output_dim`), as the published models.

    - LSH layers (`LSHSelfAttention`): shared query/key, `num_hashes`
      rounds of angular LSH into `num_buckets` buckets, attention within
      sorted chunks of `lsh_chunk_length`.
    - Local layers (`LocalSelfAttention`): chunks of `local_chunk_length`
      of the sequence itself.
    - Both attend their own chunk and `num_chunks_before` /
      `num_chunks_after` neighbours: the work per token is a constant,
      the memory linear in T (`bench/long_sequence_bench.py`).
    - Training recomputes each layer's activations in the backward pass
      (`recompute`), so memory does not grow with `num_layers`.

    Inputs and outputs: `Backbone`'s. `input_type_ids` is ignored (no
    segment table). `encoder_outputs[i]` is layer i's concat(x1, x2); the
    last one is `sequence_output` (with the final LayerNorm). `pooled_output`
    is the last real token's state when `causal` (as GPT: only it has read
    everything), else the first token's. Lengths need not be a multiple of
    a chunk: they are padded inside with masked positions.

    Args (beyond `Backbone`'s; hidden_dim is the width of each stream):
        attention_layers: list of "lsh" / "local", repeated over the layers.
        head_dim: int or None, each head's width (None: hidden_dim /
            num_heads).
        num_hashes, num_buckets: LSH rounds and buckets (an even int, or a
            factorised pair).
        lsh_chunk_length, local_chunk_length: int, items per chunk.
        num_chunks_before, num_chunks_after: int, neighbouring chunks
            attended (both attentions).
        axial_shape, axial_dims: pairs or None; their product must equal
            max_sequence_length and their sum hidden_dim.
        feed_forward_chunk_size: int, positions per feed-forward chunk (0:
            all at once).
        causal: bool, a decoder (language model) when True.
        recompute: bool, train with the recomputing reversible backward.
        attention_dropout: float, on the attention probabilities.
        activation: str, of the feed-forward ("relu" as the checkpoints).
        seed: int, of the hash rotations and the reversible seed stream.

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import ReformerBackbone
    >>> backbone = ReformerBackbone(vocabulary_size=10, num_layers=2, num_heads=2, hidden_dim=8,
    ...                             intermediate_dim=16, max_sequence_length=16, num_buckets=2,
    ...                             lsh_chunk_length=4, local_chunk_length=4)
    >>> ids = np.array([[5, 6, 7, 8, 5, 6, 0, 0]])            # [B, T]
    >>> outputs = backbone({"input_word_ids": ids, "input_mask": np.int32(ids > 0),
    ...                     "input_type_ids": np.zeros_like(ids)})
    >>> tuple(outputs["sequence_output"].shape)               # [B, T, 2H]: both streams
    (1, 8, 16)
    """

    # LSH buckets and attention chunks are cut from the padded sequence: a
    # row's outputs change with the padding after it.
    exact_at_any_length = False

    classifier_activation = None
    # The published LM head is Dense(2 * hidden_dim -> vocabulary) with a
    # bias: the token table is hidden_dim wide and cannot be tied to it.
    tied_lm_head = False

    def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                 max_sequence_length=4096, attention_layers=("local", "lsh"), head_dim=None,
                 num_hashes=2, num_buckets=64, lsh_chunk_length=64, local_chunk_length=64,
                 num_chunks_before=1, num_chunks_after=0, axial_shape=None, axial_dims=None,
                 feed_forward_chunk_size=0, causal=True, recompute=True, dropout=0.05,
                 attention_dropout=0.0, activation="relu", layer_norm_epsilon=1e-12,
                 initializer_range=0.02, seed=0, dtype=None, **kwargs):
        attention_layers = list(attention_layers)
        num_buckets = num_buckets if isinstance(num_buckets, int) else list(num_buckets)
        axial_shape = list(axial_shape) if axial_shape else None
        axial_dims = list(axial_dims) if axial_dims else None
        _check_axial(axial_shape, axial_dims, max_sequence_length, hidden_dim)
        kinds = layer_kinds(attention_layers, num_layers)
        config = dict(locals())

        self.embeddings = self._make_embeddings(config, 0, None, normalize=False)
        attention = dict(num_heads=num_heads, num_chunks_before=num_chunks_before,
                         num_chunks_after=num_chunks_after, causal=causal,
                         dropout=attention_dropout, initializer_range=initializer_range,
                         head_dim=head_dim, dtype=dtype)
        branch = dict(dropout=dropout, layer_norm_epsilon=layer_norm_epsilon, dtype=dtype)
        attention_branches, feed_forward_branches = [], []
        for i, kind in enumerate(kinds):
            if kind == "lsh":
                inner = LSHSelfAttention(num_hashes=num_hashes, num_buckets=num_buckets,
                                         chunk_length=lsh_chunk_length, seed=seed + i,
                                         name="lsh_attention", **attention)
            else:
                inner = LocalSelfAttention(chunk_length=local_chunk_length,
                                           name="local_attention", **attention)
            attention_branches.append(PreNormBranch(inner, name=f"attention_{i}", **branch))
            feed_forward_branches.append(PreNormBranch(
                ChunkedFeedForward(intermediate_dim, activation=activation, dropout=dropout,
                                   chunk_size=feed_forward_chunk_size,
                                   initializer_range=initializer_range, dtype=dtype,
                                   name="feed_forward"),
                name=f"feed_forward_{i}", **branch))
        self.reversible = ReversibleSequence(attention_branches, feed_forward_branches,
                                             recompute=recompute, seed=seed, dtype=dtype,
                                             name="reversible_layers")
        self.final_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="final_layer_norm")
        self.final_dropout = FastDropout(dropout, dtype=dtype)
        self.pooler = None

        inputs = {name: keras.Input((None,), dtype="int32", name=name)
                  for name in ("input_word_ids", "input_mask", "input_type_ids")}
        x = self.embeddings(inputs["input_word_ids"], inputs["input_type_ids"])
        pairs = self.reversible(x, x, inputs["input_mask"])
        streams = [ops.concatenate(pair, axis=-1) for pair in pairs]
        sequence = self.final_dropout(self.final_norm(streams[-1]))
        encoder_outputs = streams[:-1] + [sequence]
        pooled = (last_token_state(sequence, inputs["input_mask"]) if causal
                  else sequence[:, 0, :])
        Backbone.__init__(self, inputs=inputs,
                          outputs={"sequence_output": sequence, "pooled_output": pooled,
                                   "encoder_outputs": encoder_outputs},
                          dtype=dtype, **kwargs)
        self._record_config(config)

    @classmethod
    def check_config(cls, config):
        """The Reformer's rules between values (`validate_config` has
        checked each size alone): attention kinds, LSH buckets, the axial
        position table."""
        kinds = config.get("attention_layers", ("local", "lsh"))
        if isinstance(kinds, str) or not isinstance(kinds, (list, tuple)):
            raise ConfigError(f"attention_layers={kinds!r}: a list of "
                              f"{' / '.join(ATTENTION_KINDS)}.")
        layer_kinds(kinds, 1)
        buckets = config.get("num_buckets", 64)
        factors = [buckets] if not isinstance(buckets, (list, tuple)) else list(buckets)
        if (not 1 <= len(factors) <= 2 or any(
                isinstance(f, bool) or not isinstance(f, int) or f < 1 or (f != 1 and f % 2)
                for f in factors)):
            raise ConfigError(f"num_buckets={buckets!r}: an even integer >= 2 (or 1), or a "
                              "pair of them (buckets come in +/- rotation pairs).")
        axial_shape, axial_dims = config.get("axial_shape"), config.get("axial_dims")
        for key, value in (("axial_shape", axial_shape), ("axial_dims", axial_dims)):
            if value is not None and (not isinstance(value, (list, tuple)) or any(
                    isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in value)):
                raise ConfigError(f"{key}={value!r}: a pair of integers >= 1.")
        _check_axial(list(axial_shape) if axial_shape else None,
                     list(axial_dims) if axial_dims else None,
                     config.get("max_sequence_length", 4096), config.get("hidden_dim"))

    @classmethod
    def estimate_parameters(cls, config):
        hidden, inner = config["hidden_dim"], config["intermediate_dim"]
        heads = config["num_heads"] * (config.get("head_dim") or hidden // config["num_heads"])
        if config.get("axial_shape"):
            (rows, cols), (row_dim, col_dim) = config["axial_shape"], config["axial_dims"]
            positions = rows * row_dim + cols * col_dim
        else:
            positions = config.get("max_sequence_length", 4096) * hidden
        kinds = layer_kinds(config.get("attention_layers", ("local", "lsh")),
                            config["num_layers"])
        lsh = kinds.count("lsh")
        attention = (len(kinds) * (3 * hidden * heads + 2 * hidden)  # (q, k,) v, out, LayerNorm
                     + (len(kinds) - lsh) * hidden * heads)  # local: separate q and k
        feed_forward = len(kinds) * (2 * hidden * inner + inner + 3 * hidden)
        return (config["vocabulary_size"] * hidden + positions + attention + feed_forward
                + 4 * hidden)

    @property
    def output_dim(self):
        return 2 * self.hidden_dim

    @property
    def transformer_layers(self):
        """[(attention branch, feed-forward branch)] per layer."""
        return list(zip(self.reversible.attention_branches,
                        self.reversible.feed_forward_branches))

    def layer_kinds(self):
        return layer_kinds(self.attention_layers, self.num_layers)

    def parameter_parts(self):
        kinds = self.layer_kinds()
        counts = {kind: sum(f.count_params() for f, k in
                            zip(self.reversible.attention_branches, kinds) if k == kind)
                  for kind in ATTENTION_KINDS}
        return [
            ("embeddings", self.embeddings.count_params()),
            (f"lsh attention ({kinds.count('lsh')} layers)", counts["lsh"]),
            (f"local attention ({kinds.count('local')} layers)", counts["local"]),
            (f"feed-forward ({self.num_layers} layers)",
             sum(g.count_params() for g in self.reversible.feed_forward_branches)),
            ("final LayerNorm", self.final_norm.count_params()),
        ]


def _check_axial(axial_shape, axial_dims, max_sequence_length, hidden_dim):
    if (axial_shape is None) != (axial_dims is None):
        raise ConfigError("axial_shape and axial_dims go together (both or neither).")
    if axial_shape is None:
        return
    if len(axial_shape) != 2 or len(axial_dims) != 2:
        raise ConfigError(f"axial_shape={axial_shape} and axial_dims={axial_dims} must be pairs.")
    if axial_shape[0] * axial_shape[1] != max_sequence_length:
        raise ConfigError(f"axial_shape={axial_shape} covers {axial_shape[0] * axial_shape[1]} "
                          f"positions, not max_sequence_length={max_sequence_length}.")
    if sum(axial_dims) != hidden_dim:
        raise ConfigError(f"axial_dims={axial_dims} sum to {sum(axial_dims)}, not "
                          f"hidden_dim={hidden_dim}.")
