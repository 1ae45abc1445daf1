"""ModernBERT encoder (Warner et al., 2024, arXiv 2412.13663)."""

import keras

from kerasbert.layers import BertEmbeddings
from kerasbert.layers.precision import full_precision_policy
from kerasbert.models.backbone import Backbone
from kerasbert.models.config_checks import ConfigError
from kerasbert.models.modernbert.modernbert_block import ModernBertBlock


@keras.saving.register_keras_serializable(package="kerasbert")
class ModernBertBackbone(Backbone):
    """ModernBERT: a pre-LayerNorm encoder with rotary positions, GeGLU
    feed-forwards, no bias terms, and attention that alternates between
    global and local.

    Differences from `BertBackbone`:
      - no position or segment table: queries and keys are rotated by their
        positions (`RotaryEmbedding`), with base `global_rope_theta` on
        global layers and `local_rope_theta` on local ones; `input_type_ids`
        is accepted and ignored, as RoBERTa's;
      - layer i is global when i % global_attn_every_n_layers == 0 (0, 3,
        6, ...); the others are local: each token attends to the tokens
        within local_attention // 2 positions of it, computed in blocks at
        a cost linear in T (`kerasbert.layers.sliding_window`);
      - pre-LayerNorm blocks (`ModernBertBlock`), LayerNorms and
        projections without biases; the embedding has a LayerNorm, the
        first block none before its attention, and the last block's output
        goes through a final LayerNorm (`final_norm`);
      - GeGLU feed-forward: one projection to 2 x intermediate_dim, exact
        GELU on the first half times the second.

    `max_sequence_length` is the length the checkpoints were trained to
    (8,192); with no table, nothing is built per position. Outputs as
    `Backbone`; `encoder_outputs[i]` is block i's output, the last one after
    the final LayerNorm (it equals `sequence_output`); `pooled_output` is
    the first token's ([CLS]) final state, with no weights of its own.

    Args: `Backbone`'s (without the attention options), and
        global_attn_every_n_layers: int. Every n-th layer is global (3).
        local_attention: int. The local window, both sides together (128:
            64 tokens before and after each token).
        global_rope_theta, local_rope_theta: float. Rotary bases.
        global_attention_chunk: int or None. Above this many tokens a
            global layer attends with its queries in chunks of this many
            and recomputes each chunk's scores in the backward pass
            (`kerasbert.layers.query_chunks`): the same values without the
            [B, N, T, T] scores (512; None: always the plain matrix).

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import ModernBertBackbone
    >>> backbone = ModernBertBackbone(vocabulary_size=10, num_layers=3, num_heads=2, hidden_dim=8,
    ...                               intermediate_dim=12, local_attention=4)
    >>> outputs = backbone({"input_word_ids": np.array([[1, 5, 6, 7, 2, 0]]),
    ...                     "input_mask": np.array([[1, 1, 1, 1, 1, 0]]),
    ...                     "input_type_ids": np.zeros((1, 6), "int32")})
    >>> tuple(outputs["sequence_output"].shape), len(outputs["encoder_outputs"])
    ((1, 6, 8), 3)
    >>> [block.attention.window for block in backbone.transformer_layers]   # global, local, local
    [None, 2, 2]
    """

    classifier_activation = "gelu"
    #: the masked-LM head's transform and LayerNorm have no bias
    #: (`MaskedLMHead.tied_to`), as the published head
    masked_lm_head_bias = False
    num_segments = 0
    embedding_dim = None

    def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                 max_sequence_length=8192, dropout=0.0, layer_norm_epsilon=1e-5,
                 initializer_range=0.02, global_attn_every_n_layers=3, local_attention=128,
                 global_rope_theta=160000.0, local_rope_theta=10000.0, global_attention_chunk=512,
                 dtype=None, **kwargs):
        config = locals()
        self.embeddings = BertEmbeddings(
            vocabulary_size=vocabulary_size, max_sequence_length=max_sequence_length,
            num_segments=0, hidden_dim=hidden_dim, dropout=dropout,
            layer_norm_epsilon=layer_norm_epsilon, initializer_range=initializer_range,
            positions=False, layer_norm_bias=False, dtype=dtype, name="embeddings")
        self.transformer_layers = [
            ModernBertBlock(
                num_heads, intermediate_dim, first=i == 0,
                rotary_theta=global_rope_theta if is_global else local_rope_theta,
                window=None if is_global else local_attention // 2, dropout=dropout,
                query_chunk=global_attention_chunk if is_global else None,
                layer_norm_epsilon=layer_norm_epsilon, initializer_range=initializer_range,
                dtype=dtype, name=f"transformer_layer_{i}")
            for i, is_global in enumerate(self.global_layers(num_layers,
                                                             global_attn_every_n_layers))]
        self.final_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, center=False, dtype=full_precision_policy(dtype),
            name="final_norm")
        self._finish_encoder(config, self.embeddings,
                             [[block] for block in self.transformer_layers], pooler=False,
                             final_norm=self.final_norm)

    @staticmethod
    def global_layers(num_layers, every):
        """[bool] per layer: True where the layer attends globally."""
        return [i % every == 0 for i in range(num_layers)]

    @classmethod
    def check_config(cls, config):
        hidden, heads = config["hidden_dim"], config["num_heads"]
        if hidden % heads or (hidden // heads) % 2:
            raise ConfigError(f"hidden_dim={hidden} / num_heads={heads} must be an even head "
                              "width (rotary embeddings turn pairs of coordinates).")
        for key in ("global_attn_every_n_layers", "local_attention"):
            value = config.get(key, cls.default_config()[key])
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{key}={value!r}: must be a positive integer.")
        chunk = config.get("global_attention_chunk")
        if chunk is not None and (not isinstance(chunk, int) or isinstance(chunk, bool)
                                  or chunk < 1):
            raise ConfigError(f"global_attention_chunk={chunk!r}: must be a positive integer "
                              "or None.")
        if config.get("local_attention", 128) < 2:
            raise ConfigError("local_attention must be at least 2 (a window of one token "
                              "on each side).")

    @classmethod
    def estimate_parameters(cls, config):
        """Exact: the token table, scale-only LayerNorms (embedding, two per
        layer but the first's attention one, final), bias-free fused QKV,
        output and GeGLU projections."""
        hidden, inner = config["hidden_dim"], config["intermediate_dim"]
        layers = config["num_layers"]
        block = 4 * hidden * hidden + 3 * hidden * inner + 2 * hidden
        # + the embedding's and final LayerNorms, - the first block's attention one
        return config["vocabulary_size"] * hidden + layers * block + hidden

    def parameter_parts(self):
        return super().parameter_parts() + [("final_norm", self.final_norm.count_params())]
