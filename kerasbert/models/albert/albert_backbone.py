"""ALBERT encoder with TF Hub tensor names."""

import keras

from kerasbert.models.backbone import Backbone
from kerasbert.models.config_checks import ConfigError


@keras.saving.register_keras_serializable(package="kerasbert")
class AlbertBackbone(Backbone):
    """ALBERT: a lite BERT (Lan et al., 2019).

    Two changes to BERT's encoder cut its parameters:

    1. Factorised embedding: the token, position and segment tables are
       `embedding_dim` wide (128) and the normalised sum is projected to
       `hidden_dim` by one dense layer, so the vocabulary costs V x E rather
       than V x H.
    2. Cross-layer sharing: the encoder owns `num_groups` groups of
       `num_inner_repetitions` distinct blocks. Layer i (of `num_layers`) runs
       every block of group `i * num_groups // num_layers` in turn, so
       ALBERT-Base (one group, one block) applies the same block 12 times.

    Inputs and outputs: see `Backbone`; `pooled_output` is tanh(dense([CLS]))
    and `encoder_outputs` holds each (virtual) layer's output after all of
    its inner repetitions, as the original `all_encoder_layers`.

    Args (beyond `Backbone`'s):
        num_layers: number of (virtual) layers; divisible by num_groups.
        embedding_dim: int. Width of the embedding tables (128 in ALBERT).
        num_groups: int. Number of groups of distinct blocks (1 in every
            published ALBERT).
        num_inner_repetitions: int. Distinct blocks per group, applied in
            turn by each layer of the group (1 in every published ALBERT).
        num_segments: int. Rows of the segment table.
        dropout: ALBERT v2 trains without dropout (the default 0); v1 used 0.1.
        activation: str. ALBERT's `gelu` is the tanh approximation
            ("gelu_approximate", HF's "gelu_new"); keras-hub and Model
            Garden use the same.

    Example:

    >>> from kerasbert.models import AlbertBackbone
    >>> size = dict(vocabulary_size=10, num_heads=2, hidden_dim=8, intermediate_dim=16,
    ...             embedding_dim=4, max_sequence_length=16)
    >>> shallow, deep = AlbertBackbone(num_layers=1, **size), AlbertBackbone(num_layers=12, **size)
    >>> shallow.count_params() == deep.count_params()       # the 12 layers share one group
    True
    >>> deep.output_dim                                      # the [V, 4] table is projected to 8
    8
    """

    @classmethod
    def check_config(cls, config):
        """Each group serves the same number of layers."""
        layers, groups = config.get("num_layers"), config.get("num_groups", 1)
        if layers is not None and groups and layers % groups:
            raise ConfigError(f"num_layers={layers} is not divisible by num_groups={groups}: "
                              "each group serves the same number of layers.")

    def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                 embedding_dim=128, num_groups=1, num_inner_repetitions=1,
                 max_sequence_length=512, num_segments=2, dropout=0.0,
                 activation="gelu_approximate", layer_norm_epsilon=1e-12, initializer_range=0.02,
                 attention="full", block_size=64, num_random_blocks=3, dtype=None, **kwargs):
        if num_groups < 1 or num_inner_repetitions < 1:
            raise ValueError(
                f"num_groups ({num_groups}) and num_inner_repetitions "
                f"({num_inner_repetitions}) must be >= 1."
            )
        if num_layers % num_groups:
            raise ValueError(
                f"num_layers ({num_layers}) must be divisible by num_groups "
                f"({num_groups}): each group serves the same number of layers."
            )
        self.embeddings = self._make_embeddings(locals(), num_segments, embedding_dim)
        # groups[g][r]: the distinct blocks, the only ones owning weights.
        R = num_inner_repetitions
        blocks = self._make_blocks(
            locals(), num_groups * R,
            names=[f"group_{i // R}_inner_layer_{i % R}" for i in range(num_groups * R)])
        self.groups = [blocks[g * R:(g + 1) * R] for g in range(num_groups)]
        # Layer i runs its group's blocks: the same objects in every layer of
        # the group (cross-layer sharing). transformer_layers lists every
        # block application in call order, shared blocks repeated, as
        # `describe` and the converters expect.
        layers = [self.groups[i * num_groups // num_layers] for i in range(num_layers)]
        self.transformer_layers = [block for group in layers for block in group]
        self._finish_encoder(locals(), self.embeddings, layers, pooler=True)
