"""The encoder-decoder Transformer (Vaswani et al., 2017, "Attention Is All
You Need")."""

import math

import keras
from keras import ops

from kerasbert.layers import FastDropout
from kerasbert.layers import SinusoidalPositionEncoding
from kerasbert.layers import TransformerDecoderBlock
from kerasbert.layers import TransformerEncoderBlock
from kerasbert.layers import FusedLayerNorm
from kerasbert.layers import causal_attention_bias
from kerasbert.layers import padding_mask_to_attention_bias
from kerasbert.layers.precision import full_precision_policy
from kerasbert.models.backbone import Backbone
from kerasbert.models.config_checks import ConfigError

#: The backbone's inputs (int32 [B, S] or [B, T]; masks: 1 = real token).
INPUTS = ("encoder_token_ids", "encoder_padding_mask", "decoder_token_ids",
          "decoder_padding_mask")
POSITION_ENCODINGS = ("interleaved", "concatenated")


@keras.saving.register_keras_serializable(package="kerasbert")
class TransformerBackbone(Backbone):
    """Encoder and decoder stacks with one shared token embedding.

    Source and target share one vocabulary and one [V, H] table, which also
    makes the tied output softmax (`logits`): embeddings are the table's rows
    times sqrt(hidden_dim), plus fixed sinusoidal positions, then dropout
    (section 3.4-3.5). The encoder is `num_layers` self-attention +
    feed-forward blocks (the shared `TransformerEncoderBlock`), the decoder
    `num_layers` causal self-attention + encoder-decoder attention +
    feed-forward blocks (`TransformerDecoderBlock`); ReLU feed-forward,
    attention projections without biases (W^Q, W^K, W^V, W^O).

    Where Model Garden's `Seq2SeqTransformer` (tf-models-official, the peer
    the parity test checks) differs from the paper, the choice is a
    constructor argument with the paper's default:

    - `norm_first`: the paper normalises after each residual add (post-LN);
      tensor2tensor and Model Garden normalise each branch's input (pre-LN)
      and add a final LayerNorm to each stack. True matches Model Garden.
    - `position_encoding`: the paper interleaves sine and cosine columns
      with wavelengths 10000^(2i/d); Model Garden concatenates [sin | cos]
      with timescales spaced from 1 to 10000 inclusive ("concatenated").

    Both scale the embedding by sqrt(hidden_dim) and tie the softmax to the
    unscaled table. Model Garden also zeroes the source embeddings of
    padding tokens, which changes nothing a real token sees.

    Inputs (dict of int32): `encoder_token_ids` [B, S],
    `encoder_padding_mask` [B, S], `decoder_token_ids` [B, T] (the start id,
    then the target), `decoder_padding_mask` [B, T].

    Output: the decoder's final states, float [B, T, hidden_dim]; position t
    depends on decoder tokens 0..t and the whole source.

    Args:
        vocabulary_size: int, the shared vocabulary.
        num_layers: int, layers of EACH stack (6).
        num_heads: int.
        hidden_dim: int, d_model (512 base, 1024 big).
        intermediate_dim: int, d_ff (2048 base, 4096 big).
        dropout: float, on embedding sums, sub-layer outputs and attention
            probabilities (0.1 base; 0.3 was used for big EN-DE).
        max_sequence_length: int, rows of the sinusoid table: the longest
            source or target (including a generation's max_length + 1).
        layer_norm_epsilon: float.
        norm_first: bool, pre-LN (see above); False: post-LN, the paper.
        position_encoding: "interleaved" (the paper) or "concatenated".
        dtype: a dtype or `keras.DTypePolicy`.

    Example:

    >>> import numpy as np
    >>> from kerasbert.models import TransformerBackbone
    >>> backbone = TransformerBackbone(vocabulary_size=10, num_layers=1, num_heads=2,
    ...                                hidden_dim=8, intermediate_dim=16, max_sequence_length=16)
    >>> source = np.array([[5, 6, 7, 2]])                     # [B, S]
    >>> target = np.array([[1, 8, 9]])                        # [B, T], the start id first
    >>> states = backbone({"encoder_token_ids": source,
    ...                    "encoder_padding_mask": np.ones_like(source),
    ...                    "decoder_token_ids": target,
    ...                    "decoder_padding_mask": np.ones_like(target)})
    >>> tuple(states.shape), tuple(backbone.logits(states).shape)   # [B, T, H], [B, T, V]
    ((1, 3, 8), (1, 3, 10))
    """

    #: no pooler, no `pooled_output`: a sequence-to-sequence model
    causal = False

    def __init__(self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
                 dropout=0.1, max_sequence_length=1024, layer_norm_epsilon=1e-6,
                 norm_first=False, position_encoding="interleaved", dtype=None, **kwargs):
        config = dict(locals())
        self.check_config(config)
        # Kernels as Xavier-uniform's spread for a square matrix (stddev
        # d^-1/2); the table N(0, d^-1/2), so its scaled rows have unit scale.
        init_range = hidden_dim ** -0.5
        self.shared_embedding = keras.layers.ReversibleEmbedding(
            vocabulary_size, hidden_dim,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=init_range),
            dtype=dtype, name="token_embedding")
        self.position_encoding_layer = SinusoidalPositionEncoding(
            max_sequence_length, layout=position_encoding, dtype=dtype,
            name="position_encoding")
        self.encoder_dropout = FastDropout(dropout, dtype=dtype,
                                           name="encoder_embedding_dropout")
        self.decoder_dropout = FastDropout(dropout, dtype=dtype,
                                           name="decoder_embedding_dropout")
        block = dict(num_heads=num_heads, intermediate_dim=intermediate_dim, activation="relu",
                     dropout=dropout, layer_norm_epsilon=layer_norm_epsilon,
                     initializer_range=init_range, norm_first=norm_first, use_bias=False,
                     dtype=dtype)
        self.encoder_layers = [TransformerEncoderBlock(name=f"encoder_layer_{i}", **block)
                               for i in range(num_layers)]
        self.decoder_layers = [TransformerDecoderBlock(name=f"decoder_layer_{i}", **block)
                               for i in range(num_layers)]
        self.encoder_norm = self.decoder_norm = None
        if norm_first:
            # Pre-LN leaves the residual stream unnormalised: each stack ends
            # with a LayerNorm (on the stream's policy: float32 when mixed).
            norm_policy = full_precision_policy(dtype)
            self.encoder_norm = FusedLayerNorm(
                epsilon=layer_norm_epsilon, dtype=norm_policy, name="encoder_output_layer_norm")
            self.decoder_norm = FusedLayerNorm(
                epsilon=layer_norm_epsilon, dtype=norm_policy, name="decoder_output_layer_norm")
        self.num_layers, self.num_heads, self.hidden_dim = num_layers, num_heads, hidden_dim

        inputs = {name: keras.Input((None,), dtype="int32", name=name) for name in INPUTS}
        memory = self.encode(inputs["encoder_token_ids"], inputs["encoder_padding_mask"])
        hidden = self.decode(inputs["decoder_token_ids"], memory,
                             inputs["encoder_padding_mask"], inputs["decoder_padding_mask"])
        Backbone.__init__(self, inputs=inputs, outputs=hidden, dtype=dtype, **kwargs)
        self._record_config(config)

    # --- the pieces generation and the task model call -------------------

    def embed(self, token_ids, start_index=0):
        """Scaled token rows plus the sinusoid of each position (before
        dropout): float [B, T, H]."""
        x = self.shared_embedding(token_ids)
        x = x * ops.cast(math.sqrt(self.hidden_dim), x.dtype)
        return x + self.position_encoding_layer(x, start_index=start_index)

    def encode(self, encoder_token_ids, encoder_padding_mask, training=None):
        """The encoder's output, float [B, S, H]."""
        x = self.encoder_dropout(self.embed(encoder_token_ids), training=training)
        bias = padding_mask_to_attention_bias(encoder_padding_mask)
        for block in self.encoder_layers:
            x = block(x, attention_bias=bias, training=training)
        return self.encoder_norm(x) if self.encoder_norm is not None else x

    def decode(self, decoder_token_ids, encoder_output, encoder_padding_mask,
               decoder_padding_mask=None, training=None):
        """The decoder's final states for a whole target, float [B, T, H]
        (teacher forcing: position t sees decoder tokens 0..t)."""
        if decoder_padding_mask is None:
            decoder_padding_mask = ops.ones_like(decoder_token_ids)
        x = self.decoder_dropout(self.embed(decoder_token_ids), training=training)
        self_bias = causal_attention_bias(decoder_padding_mask)
        cross_bias = padding_mask_to_attention_bias(encoder_padding_mask)
        for block in self.decoder_layers:
            x = block(x, encoder_output, self_attention_bias=self_bias,
                      cross_attention_bias=cross_bias, training=training)
        return self.decoder_norm(x) if self.decoder_norm is not None else x

    def logits(self, hidden):
        """Tied softmax logits: hidden @ table^T, float32 [..., V]."""
        return ops.cast(self.shared_embedding(hidden, reverse=True), "float32")

    def decoding_memory(self, encoder_output, encoder_padding_mask):
        """What every decoding step reads from the source, computed once:
        {"memory_heads": per layer (key, value) [B, S, N, D],
        "cross_bias": [B, 1, 1, S]}. Row b may be repeated (beams) with
        `keras.tree.map_structure`."""
        return {
            "memory_heads": [tuple(block.cross_attention.project_memory(encoder_output))
                             for block in self.decoder_layers],
            "cross_bias": padding_mask_to_attention_bias(encoder_padding_mask),
        }

    def decoding_cache(self, batch_size, max_length):
        """Empty self-attention caches for `max_length` steps: {"keys": per
        layer [B, L, N, D], "values": the same}, zeros in the compute dtype."""
        head_dim = self.hidden_dim // self.num_heads
        shape = (batch_size, max_length, self.num_heads, head_dim)
        dtype = self.dtype_policy.compute_dtype
        return {"keys": [ops.zeros(shape, dtype) for _ in self.decoder_layers],
                "values": [ops.zeros(shape, dtype) for _ in self.decoder_layers]}

    def decode_step(self, token_ids, index, cache, memory):
        """One incremental decoding step.

        Args:
            token_ids: int32 [B], the tokens at position `index`.
            index: int32 scalar.
            cache: `decoding_cache`'s structure, rows < index filled.
            memory: `decoding_memory`'s structure.

        Returns:
            (float [B, H] the decoder's final state at `index`, the cache
            with row `index` written).
        """
        x = self.embed(ops.expand_dims(ops.cast(token_ids, "int32"), 1), start_index=index)
        keys, values = [], []
        for i, block in enumerate(self.decoder_layers):
            x, key, value = block.decode_step(
                x, index, cache["keys"][i], cache["values"][i], memory["memory_heads"][i],
                memory["cross_bias"])
            keys.append(key)
            values.append(value)
        if self.decoder_norm is not None:
            x = self.decoder_norm(x)
        return x[:, 0, :], {"keys": keys, "values": values}

    # --- description -------------------------------------------------------

    @classmethod
    def check_config(cls, config):
        encoding = config.get("position_encoding", "interleaved")
        if encoding not in POSITION_ENCODINGS:
            raise ConfigError(f"position_encoding={encoding!r}: must be one of "
                              f"{', '.join(POSITION_ENCODINGS)}.")
        hidden = config.get("hidden_dim")
        if isinstance(hidden, int) and hidden % 2:
            raise ConfigError(f"hidden_dim={hidden}: a sinusoidal encoding needs an "
                              "even width.")

    @property
    def token_embedding(self):
        return self.shared_embedding

    @classmethod
    def estimate_parameters(cls, config):
        """Exact: V*H shared + per encoder layer 4H^2 + 2HI + I + H + 4H,
        per decoder layer 8H^2 + 2HI + I + H + 6H, + 4H for the final
        LayerNorms of a pre-LN model."""
        hidden, inner = config["hidden_dim"], config["intermediate_dim"]
        feed_forward = 2 * hidden * inner + inner + hidden
        encoder = 4 * hidden * hidden + feed_forward + 4 * hidden
        decoder = 8 * hidden * hidden + feed_forward + 6 * hidden
        final = 4 * hidden if config.get("norm_first") else 0
        return (config["vocabulary_size"] * hidden
                + config["num_layers"] * (encoder + decoder) + final)

    def parameter_parts(self):
        layers = f"{self.num_layers} layers"
        parts = [
            ("shared embedding", self.shared_embedding.count_params()),
            (f"encoder ({layers})", sum(b.count_params() for b in self.encoder_layers)),
            (f"decoder ({layers})", sum(b.count_params() for b in self.decoder_layers)),
        ]
        if self.encoder_norm is not None:
            parts.append(("final layer norms",
                          self.encoder_norm.count_params() + self.decoder_norm.count_params()))
        return parts
