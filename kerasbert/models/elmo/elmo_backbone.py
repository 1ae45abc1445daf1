"""ELMo's bidirectional language model (Peters et al. 2018, "Deep
contextualized word representations"; allenai/bilm-tf) as a feature encoder."""

import keras
from keras import ops

from kerasbert.layers import FastDropout
from kerasbert.layers.character_cnn import ELMO_FILTERS
from kerasbert.layers.character_cnn import CharacterCNN
from kerasbert.layers.highway import Highway
from kerasbert.layers.projected_lstm import ProjectedLSTM
from kerasbert.layers.scalar_mix import ScalarMix
from kerasbert.models.backbone import Backbone
from kerasbert.models.config_checks import ConfigError
from kerasbert.text.elmo_characters import BEGIN_SENTENCE
from kerasbert.text.elmo_characters import END_SENTENCE
from kerasbert.text.elmo_characters import boundary_char_ids

DIRECTIONS = ("forward", "backward")

#: The most character slots a word may have: the published files use 50;
#: past this an options file is a mistake or a trap (each slot is a
#: column of every batch's character ids).
MAX_CHARACTERS_PER_TOKEN = 1024


def with_sentence_boundaries(char_ids, mask, max_characters):
    """Puts the <S> word before and the </S> word after each row's words.

    Args:
        char_ids: int32 [B, W, C], right-padded rows.
        mask: int32 [B, W].

    Returns:
        (char ids [B, W + 2, C], mask [B, W + 2]): row b's words at 1..n_b,
        <S> at 0, </S> at n_b + 1 (an empty row gets both marks).
    """
    lengths = ops.sum(mask, axis=1, keepdims=True)  # [B, 1]
    ids = ops.pad(char_ids * ops.expand_dims(mask, -1), ((0, 0), (1, 1), (0, 0)))
    padded = ops.pad(mask, ((0, 0), (1, 1)))
    steps = ops.cumsum(ops.ones_like(padded), axis=1) - 1  # [B, W + 2]
    # ops.equal, not ==: a symbolic KerasTensor does not overload ==.
    is_bos, is_eos = ops.equal(steps, 0), ops.equal(steps, lengths + 1)
    # Both marks land on zeros (the added first step, the padding after the
    # last word), so adding them places them.
    bos = boundary_char_ids(BEGIN_SENTENCE, max_characters)
    eos = boundary_char_ids(END_SENTENCE, max_characters)
    ids = (ids + ops.expand_dims(ops.cast(is_bos, "int32"), -1) * bos
           + ops.expand_dims(ops.cast(is_eos, "int32"), -1) * eos)
    new_mask = ops.cast(ops.less_equal(steps, lengths + 1), "int32")
    return ids, new_mask


@keras.saving.register_keras_serializable(package="kerasbert")
class ElmoBackbone(Backbone):
    """ELMo's biLM: character CNN, highway layers, a projection, then
    `num_layers` LSTM layers in each direction, and a learned mix of its
    layers.

        char ids [B, W, C] -> CharacterCNN (sum of filter counts F)
          -> Highway(num_highway) -> Dense(F -> P)          token x_k  [B, W, P]
        forward:  LSTM_1 -> LSTM_2 (+ its input)  ...     [B, W, P] each
        backward: the same on each row reversed within its words
        layer 0 = [x_k; x_k]; layer l = [forward_l; backward_l]    [B, W, 2P]

    Each LSTM is `ProjectedLSTM` (lstm_dim cells projected to
    projection_dim, cell and output clipped); from the second layer on, a
    layer's input is added to its output (`use_skip_connections`), as the
    published model's ResidualWrapper does. The forward LSTM at word k has
    read words 1..k, the backward one words k..n, which is what the two
    language-model losses train (`kerasbert.tasks.ElmoPretrainer`).

    With `add_sentence_boundaries` (the published use) the <S> and </S>
    words are put around each row before the CNN and their outputs are
    dropped after the LSTMs, so output k is word k of the input.

    Inputs (dict):
        input_char_ids: int32 [B, W, max_characters_per_token], each word's
            ids as `kerasbert.text.elmo_characters` numbers them (0: no word).
        input_mask: int32 [B, W], 1 for real words (right padding).

    Outputs (dict):
        encoder_outputs: list of num_layers + 1 float [B, W, 2P]: the token
            layer (duplicated) and each biLSTM layer; zeros at padding.
        sequence_output: [B, W, 2P], `ScalarMix` of encoder_outputs: gamma *
            sum softmax(s)_l layer_l, then dropout: the task-specific ELMo
            vector of eq. 1 of the paper.
        pooled_output: [B, 2P], the mean of sequence_output over real words.

    Args:
        lstm_dim: int. LSTM cells per layer and direction (4096 original).
        projection_dim: int. P (512 original).
        num_layers: int. LSTM layers per direction (2).
        num_highway: int. Highway layers (2 original, 1 small/medium).
        filters: list of [width, count] (`ELMO_FILTERS`, 2048 in all).
        activation: the CNN's "relu" (published) or "tanh".
        num_characters: int. Character ids 0..num_characters-1 (262).
        character_embedding_dim: int (16).
        max_characters_per_token: int. C (50).
        cell_clip, projection_clip: float or None (3.0 and 3.0).
        use_skip_connections: bool. The residual between LSTM layers.
        add_sentence_boundaries: bool. See above.
        freeze_bilm: bool. Everything but the scalar mix is not trainable
            (the feature-based use: `finetune --freeze-backbone`).
        dropout: float. Dropout on sequence_output.
        dtype: a dtype or policy.

    Example:

    >>> from kerasbert.models import ElmoBackbone
    >>> from kerasbert.text.elmo_characters import batch_char_ids
    >>> backbone = ElmoBackbone(lstm_dim=16, projection_dim=4, num_layers=1, num_highway=1,
    ...                         filters=((1, 4), (2, 4)), max_characters_per_token=10)
    >>> char_ids, mask = batch_char_ids([["Hello", "world"], ["Hi"]], max_characters=10)
    >>> char_ids.shape, mask.tolist()                         # [B, W, C], [B, W]
    ((2, 2, 10), [[1, 1], [1, 0]])
    >>> outputs = backbone({"input_char_ids": char_ids, "input_mask": mask})
    >>> tuple(outputs["sequence_output"].shape), len(outputs["encoder_outputs"])   # [B, W, 2P]
    ((2, 2, 8), 2)
    """

    def __init__(self, lstm_dim=4096, projection_dim=512, num_layers=2, num_highway=2,
                 filters=ELMO_FILTERS, activation="relu", num_characters=262,
                 character_embedding_dim=16, max_characters_per_token=50, cell_clip=3.0,
                 projection_clip=3.0, use_skip_connections=True,
                 add_sentence_boundaries=True, freeze_bilm=False, dropout=0.0, dtype=None,
                 **kwargs):
        filters = [[int(w), int(n)] for w, n in filters]
        self.char_cnn = CharacterCNN(num_characters, character_embedding_dim, filters,
                                     activation, dtype=dtype, name="char_cnn")
        self.highway = Highway(num_highway, dtype=dtype, name="highway")
        width = self.char_cnn.output_dim
        # As the published code: no projection when the CNN is P wide already.
        self.projection = None
        if width != projection_dim:
            self.projection = keras.layers.Dense(
                projection_dim, kernel_initializer=keras.initializers.RandomNormal(
                    stddev=(1.0 / width) ** 0.5), dtype=dtype, name="projection")
        self.lstms = {
            direction: [ProjectedLSTM(lstm_dim, projection_dim, cell_clip, projection_clip,
                                      go_backwards=direction == "backward", dtype=dtype,
                                      name=f"{direction}_lstm_{i}")
                        for i in range(num_layers)]
            for direction in DIRECTIONS}
        self.scalar_mix = ScalarMix(num_layers + 1, dtype=dtype, name="scalar_mix")
        if freeze_bilm:
            self.freeze()

        char_ids = keras.Input((None, max_characters_per_token), dtype="int32",
                               name="input_char_ids")
        mask = keras.Input((None,), dtype="int32", name="input_mask")
        ids, lm_mask = char_ids, mask
        if add_sentence_boundaries:
            ids, lm_mask = with_sentence_boundaries(char_ids, mask, max_characters_per_token)
        keep = ops.expand_dims(ops.cast(lm_mask, self.char_cnn.compute_dtype), -1)
        tokens = self.highway(self.char_cnn(ids))
        if self.projection is not None:
            tokens = self.projection(tokens)
        tokens = tokens * keep  # [B, W', P]
        layers = [ops.concatenate([tokens, tokens], axis=-1)]
        streams = {}
        for direction in DIRECTIONS:
            x, streams[direction] = tokens, []
            for i, lstm in enumerate(self.lstms[direction]):
                out = lstm(x, lm_mask)
                if use_skip_connections and i > 0:
                    out = out + x
                streams[direction].append(out)
                x = out
        layers += [ops.concatenate([f, b], axis=-1)
                   for f, b in zip(streams["forward"], streams["backward"])]
        if add_sentence_boundaries:
            # Drop <S> and the last step; a short row's </S> lands on a
            # padded word, which the mask zeroes.
            real = ops.expand_dims(ops.cast(mask, tokens.dtype), -1)
            layers = [layer[:, 1:-1] * real for layer in layers]
        mixed = self.scalar_mix(layers)
        if dropout:
            mixed = FastDropout(dropout, dtype=dtype, name="dropout")(mixed)
        real = ops.expand_dims(ops.cast(mask, mixed.dtype), -1)
        pooled = ops.sum(mixed * real, axis=1) / ops.maximum(ops.sum(real, axis=1), 1)
        Backbone.__init__(self, inputs={"input_char_ids": char_ids, "input_mask": mask},
                          outputs={"sequence_output": mixed, "pooled_output": pooled,
                                   "encoder_outputs": layers},
                          dtype=dtype, **kwargs)
        self._record_config(locals())

    def freeze(self):
        """The feature-based use: the biLM's weights stop training, the
        scalar mix does not; recorded as `freeze_bilm` in the config."""
        for layer in self.bilm_layers():
            layer.trainable = False
        self.freeze_bilm = True

    def bilm_layers(self):
        """The language model's layers (all but the scalar mix), in the order
        of a published weight file."""
        layers = [self.char_cnn, self.highway]
        layers += [self.projection] if self.projection is not None else []
        return layers + [lstm for d in DIRECTIONS for lstm in self.lstms[d]]

    @property
    def hidden_dim(self):
        """2P, the width of every output layer."""
        return 2 * self.projection_dim

    @classmethod
    def check_config(cls, config):
        for key in ("lstm_dim", "projection_dim", "num_layers", "num_characters",
                    "character_embedding_dim", "max_characters_per_token"):
            value = config.get(key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{key}={value!r}: must be an integer >= 1.")
        if config["max_characters_per_token"] > MAX_CHARACTERS_PER_TOKEN:
            raise ConfigError(
                f"max_characters_per_token={config['max_characters_per_token']}: at most "
                f"{MAX_CHARACTERS_PER_TOKEN} (bilm-tf reads 50 and cuts longer words; every "
                "word of a batch takes this many character slots).")
        highway = config.get("num_highway")
        if isinstance(highway, bool) or not isinstance(highway, int) or highway < 0:
            raise ConfigError(f"num_highway={highway!r}: must be an integer >= 0.")
        if config.get("activation") not in ("relu", "tanh"):
            raise ConfigError(f"activation={config.get('activation')!r}: ELMo's CNN takes "
                              "relu or tanh.")
        filters = config.get("filters")
        ok = isinstance(filters, (list, tuple)) and filters and all(
            isinstance(f, (list, tuple)) and len(f) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in f)
            for f in filters)
        if not ok:
            raise ConfigError(f"filters={filters!r}: must be a list of [width, count] "
                              "pairs of integers >= 1.")
        widest = max(w for w, _ in filters)
        if widest > config["max_characters_per_token"]:
            raise ConfigError(f"filters={filters!r}: a filter of width {widest} is wider than "
                              f"max_characters_per_token={config['max_characters_per_token']}.")

    @classmethod
    def estimate_parameters(cls, config):
        """The exact count (`bilm_parameters` plus the scalar mix)."""
        return cls.bilm_parameters(config) + config.get("num_layers", 2) + 2

    @classmethod
    def bilm_parameters(cls, config):
        """The biLM's parameter count without building it: what the paper
        publishes (no softmax over the word vocabulary, no scalar mix)."""
        config = {**cls.default_config(), **config}
        dim, filters = config["character_embedding_dim"], config["filters"]
        width = sum(n for _, n in filters)
        proj, cells = config["projection_dim"], config["lstm_dim"]
        count = (config["num_characters"] - 1) * dim
        count += sum(w * dim * n + n for w, n in filters)
        count += config["num_highway"] * 2 * (width * width + width)
        if width != proj:
            count += width * proj + proj
        lstm = (2 * proj) * 4 * cells + 4 * cells + cells * proj
        return count + 2 * config["num_layers"] * lstm

    def parameter_parts(self):
        lstm = sum(l.count_params() for d in DIRECTIONS for l in self.lstms[d])
        parts = [("character CNN", self.char_cnn.count_params()),
                 (f"highway ({self.num_highway} layer{'s' if self.num_highway != 1 else ''})", self.highway.count_params())]
        if self.projection is not None:
            parts.append(("projection", self.projection.count_params()))
        parts.append((f"biLSTM ({self.num_layers} layers x 2 directions)", lstm))
        parts.append(("biLM (as published, no softmax)",
                      sum(count for _, count in parts)))
        parts.append(("scalar mix", self.scalar_mix.count_params()))
        return parts
