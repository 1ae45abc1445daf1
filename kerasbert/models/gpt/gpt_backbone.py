"""GPT-style decoder-only backbone (Radford et al., 2018, "GPT-1")."""

import keras
from keras import ops

from kerasbert.models.backbone import Backbone


def last_token_state(sequence_output, padding_mask):
    """The hidden state at each row's LAST real token.

    Args:
        sequence_output: float [B, T, H].
        padding_mask: int [B, T], 1 for real tokens.

    Returns:
        float [B, H]. The last real token is the highest position with mask
        1 (so any padding layout works); a fully padded row gives position 0.
    """
    mask = ops.cast(padding_mask, "int32")
    # 0-based positions by cumulative sum (T may be unknown at build time).
    positions = ops.cumsum(ops.ones_like(mask), axis=1) - 1
    last = ops.max(positions * mask, axis=1)  # [B]
    index = ops.expand_dims(ops.expand_dims(last, -1), -1)  # [B, 1, 1]
    return ops.take_along_axis(sequence_output, index, axis=1)[:, 0, :]


@keras.saving.register_keras_serializable(package="kerasbert")
class GptBackbone(Backbone):
    """Decoder-only transformer with causal self-attention (GPT-1).

    The zoo's shared pieces in GPT-1's arrangement: token + learned position
    embeddings (summed, dropout, NO LayerNorm and no segment table), then
    `num_layers` post-LayerNorm blocks (`TransformerEncoderBlock`, the same
    block as BERT's) whose attention is causal: the shared encoder graph
    builds one [B, 1, T, T] bias that lets position t attend to positions
    <= t that are real tokens (`causal_attention_bias`). GELU is the tanh
    approximation, as in OpenAI's code; LayerNorm epsilon 1e-5. There is no
    final LayerNorm (GPT-2 added one) and no pooler.

    The language-model head is the transposed token embedding (tied, no
    bias), applied by `kerasbert.tasks.CausalLM`.

    Inputs and outputs: `Backbone`'s, right-padded (causal attention makes
    right padding invisible to the real tokens), `input_type_ids` ignored (a
    pair is told apart by its delimiter token). Position t of
    `sequence_output` depends on tokens 0..t only. `pooled_output` is the
    hidden state at the LAST real token (the highest position with
    input_mask 1): under causal attention only that token has read the whole
    input, which is why GPT-1's classifier reads it (the "extract" token at
    the end of `start a delim b extract`; see `kerasbert.tasks.GptClassifier`).
    It has no weights of its own.

    Args (beyond `Backbone`'s; vocabulary_size 40478 for GPT-1's BPE):
        activation: str. "gelu_approximate" (tanh form, GPT-1); any name of
            `kerasbert.layers.activations`.

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import GptBackbone
    >>> backbone = GptBackbone(vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8,
    ...                        intermediate_dim=16, max_sequence_length=16)
    >>> outputs = backbone({"input_word_ids": np.array([[5, 6, 7, 0]]),      # [B, T], causal
    ...                     "input_mask": np.array([[1, 1, 1, 0]]),
    ...                     "input_type_ids": np.zeros((1, 4), "int32")})   # ignored
    >>> tuple(outputs["sequence_output"].shape), tuple(outputs["pooled_output"].shape)
    ((1, 4, 8), (1, 8))
    """

    # GPT-1's classifier is a linear layer on the extract token's state.
    classifier_activation = None
    # Every position sees only itself and earlier ones (task models that
    # re-run parts of the encoder, e.g. BertPretrainer's sparse last layer,
    # check this).
    causal = True

    def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                 max_sequence_length=512, dropout=0.1, layer_norm_epsilon=1e-5,
                 initializer_range=0.02, activation="gelu_approximate", dtype=None, **kwargs):
        # No LayerNorm on the embedding sum, causal attention, the last real
        # token as pooled_output.
        self._build_encoder(locals(), pooler=False, normalize_embeddings=False, causal=True,
                            pool=last_token_state)
