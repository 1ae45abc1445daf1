"""Base class of every backbone: presets, config, the shared embedding."""

import inspect

import keras

from kerasbert.layers import BertEmbeddings
from kerasbert.layers import ClsPooler
from kerasbert.layers import TransformerEncoderBlock
from kerasbert.layers import causal_attention_bias
from kerasbert.layers import padding_mask_to_attention_bias
from kerasbert.layers.early_attributes import EarlyAttributes
from kerasbert.models.config_checks import CHECKED_KEYS
from kerasbert.models.config_checks import check_memory
from kerasbert.models.config_checks import validate_config
from kerasbert.models.presets import get_preset
from kerasbert.models.presets import is_preset
from kerasbert.models.presets import load_from_source


class Backbone(EarlyAttributes, keras.Model):
    """A functional encoder whose constructor arguments are its config.

    Every family takes and returns the same tensors, with TF Hub's names, so
    every task model, pretrainer and export works on any of them:

    Inputs (dict of int32 [B, T]):
        input_word_ids: token ids, right-padded.
        input_mask: 1 for real tokens, 0 for padding.
        input_type_ids: segment ids (0 for sentence A, 1 for sentence B);
            accepted and ignored by families without a segment table.

    Outputs (dict):
        sequence_output: [B, T, hidden_dim], the last layer.
        pooled_output: [B, hidden_dim]: tanh(dense([CLS])) where the family
            has a pooler, else the first token's state (GPT: the last real
            token's).
        encoder_outputs: list of num_layers tensors [B, T, hidden_dim], the
            output of every layer (the last equals sequence_output).

    Arguments every family takes (each family's docstring adds its own and
    the defaults of its checkpoints):
        vocabulary_size: int. Rows of the token table.
        num_layers: int.
        num_heads: int. hidden_dim must divide by it.
        hidden_dim: int.
        intermediate_dim: int. Feed-forward width (4 * hidden_dim in BERT).
        max_sequence_length: int. Rows of the position table.
        dropout: float. Embedding, hidden and attention-probability dropout.
        layer_norm_epsilon: float.
        initializer_range: float. Stddev of the truncated normal init.
        attention, block_size, num_random_blocks: "full" attention or
            "bigbird" block-sparse attention on the same weights
            (`attention_options`; all but GPT).
        dtype: a dtype or `keras.DTypePolicy`, e.g. "mixed_float16".

    Subclasses build their graph in `__init__` with `_build_encoder(locals(),
    ...)` (or its pieces `_make_embeddings`, `_make_blocks`,
    `_finish_encoder` where a family differs: ALBERT's shared groups,
    ELECTRA's shared embeddings), which stores every argument as an attribute
    of the same name for `get_config`, so `from_config(get_config())`
    rebuilds the same architecture.

    Example:

    >>> from kerasbert.models import Backbone, BertBackbone
    >>> config = BertBackbone.preset_config("bert_base")     # checked, nothing built
    >>> f"{BertBackbone.estimate_parameters(config):,}"
    '109,482,240'
    >>> backbone = Backbone.from_preset("bert_tiny", num_layers=1, vocabulary_size=10)
    >>> type(backbone).__name__, backbone.output_dim          # random weights
    ('BertBackbone', 128)
    >>> rebuilt = BertBackbone.from_config(backbone.get_config())
    >>> rebuilt.count_params() == backbone.count_params()
    True
    """

    #: the blocks' activation when it is not a constructor argument
    activation = "gelu"
    #: a causal LM decodes with the token embedding (GPT); False: with its
    #: own [vocabulary_size, output_dim] decoder and bias (the Reformer)
    tied_lm_head = True
    #: the masked-LM head's transform (dense, LayerNorm) has biases
    #: (`MaskedLMHead.tied_to`); False: ModernBERT's bias-free head
    masked_lm_head_bias = True

    def __init__(self, *args, dtype=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.attach_early_attributes()  # PyTorch: the sublayers set before this call
        # Functional models drop `dtype`; keep the policy the sublayers were
        # built with so get_config (and a reloaded model) records it.
        if dtype is not None:
            self.dtype_policy = keras.dtype_policies.get(dtype)

    @classmethod
    def from_preset(cls, name, **overrides):
        """A preset architecture (random weights) or published weights.

        Args:
            name: a built-in preset ("bert_base"), or a handle to weights:
                "hf://OWNER/NAME[@REVISION]", "kaggle://OWNER/MODEL/keras/
                VARIANT[/VERSION]", or a local directory (Hugging Face
                layout, keras-hub preset, google-research/bert checkpoint,
                TF Hub encoder, kerasbert run) or `.keras` file. The family
                of a handle is detected; it must be `cls` or a subclass.
            **overrides: replace preset values, e.g.
                `BertBackbone.from_preset("bert_base", vocabulary_size=21128)`;
                on weights, only values that keep the shapes (dropout,
                dtype); one that contradicts them is an error.
        """
        if not is_preset(name):
            backbone = load_from_source(name, **overrides)
            if not isinstance(backbone, cls):
                raise ValueError(f"{name} holds a {type(backbone).__name__}, not a "
                                 f"{cls.__name__}.")
            return backbone
        preset_cls = get_preset(name)["backbone_class"]
        if not issubclass(preset_cls, cls):
            raise ValueError(
                f"Preset {name!r} is a {preset_cls.__name__}, not a "
                f"{cls.__name__}."
            )
        return preset_cls(**preset_cls.preset_config(name, **overrides))

    @classmethod
    def preset_config(cls, name, **overrides):
        """The constructor arguments of preset `name` with `overrides`,
        every value checked as `from_preset` checks them, nothing built:
        known names, the preset's types, `validate_config` with the
        family's rules, and the weights within `memory_budget`.

        Raises:
            ValueError (a `ConfigError` for a value no model can have).
        """
        preset = get_preset(name)
        valid = cls.config_names()
        unknown = sorted(set(overrides) - set(valid))
        if unknown:
            raise ValueError(
                f"Unknown override(s) {', '.join(unknown)} for "
                f"{cls.__name__}; valid: {', '.join(valid)}."
            )
        for key, value in overrides.items():
            expected = preset["config"].get(key)
            if key in CHECKED_KEYS:
                continue  # validate_config names what it must be
            if isinstance(expected, bool) and not isinstance(value, bool):
                raise ValueError(f"Override {key}={value!r} must be true or false.")
            if isinstance(expected, (int, float)) and not isinstance(
                value, (int, float)
            ):
                raise ValueError(
                    f"Override {key}={value!r} must be a number like the "
                    f"preset's {key}={expected!r}."
                )
            if isinstance(expected, int) and not isinstance(value, int):
                raise ValueError(
                    f"Override {key}={value!r} must be an integer."
                )
        config = {**cls.default_config(), **preset["config"], **overrides}
        validate_config(config, cls)
        check_memory(cls, config)
        return {**preset["config"], **overrides}

    @classmethod
    def check_config(cls, config):
        """The family's rules between values, beyond `validate_config`'s
        (a family overrides it). Raises ConfigError."""

    @classmethod
    def estimate_parameters(cls, config):
        """The parameter count of `config`, computed without building
        anything (an upper bound within one pooler and one LayerNorm of
        `count_params()`: families without them are counted as BERT).
        Python integers, so absurd sizes do not overflow."""
        hidden, inner = config["hidden_dim"], config["intermediate_dim"]
        width = config.get("embedding_dim") or hidden
        embeddings = (config["vocabulary_size"] + config.get("max_sequence_length", 512)
                      + (config.get("num_segments") or 0)) * width + 2 * width
        if width != hidden:
            embeddings += width * hidden + hidden
        # ALBERT's layers share num_groups x num_inner_repetitions blocks.
        blocks = (config["num_groups"] * config.get("num_inner_repetitions", 1)
                  if "num_groups" in config else config["num_layers"])
        block = 4 * hidden * hidden + 2 * hidden * inner + 9 * hidden + inner
        return embeddings + blocks * block + hidden * hidden + hidden

    @classmethod
    def default_config(cls):
        """{name: default} of the constructor arguments that have one."""
        return {n: p.default for n, p in cls._config_parameters().items()
                if p.default is not inspect.Parameter.empty}

    @classmethod
    def config_names(cls):
        """Names of the constructor arguments that make up the config."""
        return list(cls._config_parameters())

    @classmethod
    def _config_parameters(cls):
        """{name: `inspect.Parameter`}: the positional-or-keyword arguments
        of this class's constructor and of the families it derives from, so
        a variant lists only the defaults it changes (BigBird over BERT);
        the nearest class's default wins."""
        params = {}
        for klass in cls.__mro__:
            if klass is Backbone:
                break
            if "__init__" in vars(klass):
                for name, p in inspect.signature(klass.__init__).parameters.items():
                    if name != "self" and p.kind is p.POSITIONAL_OR_KEYWORD:
                        params.setdefault(name, p)
        return params

    # --- the encoder every family builds ---------------------------------

    def _build_encoder(self, config, *, pooler, num_segments=0, embedding_dim=None,
                       normalize_embeddings=True, causal=False, pool=None):
        """Builds the zoo's encoder from a constructor's `locals()` and
        finishes the model: embeddings, one block per layer, the optional
        `ClsPooler`, the shared graph (`encoder_graph`), the config record.

        Args:
            config: the constructor's `locals()` (every config argument plus
                `kwargs`); `activation` falls back to the class attribute.
            pooler: build BERT's tanh pooler (else `pooled_output` is the
                first token's state, or `pool`'s result).
            num_segments, embedding_dim: the embedding's segment table and
                factorised width (None: hidden_dim).
            normalize_embeddings: LayerNorm after the embedding sum (all but
                GPT).
            causal, pool: as `_finish_encoder`.
        """
        self.embeddings = self._make_embeddings(config, num_segments, embedding_dim,
                                                normalize_embeddings)
        self.transformer_layers = self._make_blocks(config, config["num_layers"])
        self._finish_encoder(config, self.embeddings,
                             [[block] for block in self.transformer_layers],
                             pooler=pooler, causal=causal, pool=pool)

    def _make_embeddings(self, config, num_segments, embedding_dim, normalize=True):
        """The `BertEmbeddings` (token, position, segment tables) of `config`."""
        return BertEmbeddings(
            vocabulary_size=config["vocabulary_size"],
            max_sequence_length=config["max_sequence_length"],
            num_segments=num_segments, hidden_dim=config["hidden_dim"],
            embedding_dim=embedding_dim, dropout=config["dropout"],
            layer_norm_epsilon=config["layer_norm_epsilon"],
            initializer_range=config["initializer_range"], normalize=normalize,
            axial_shape=config.get("axial_shape"), axial_dims=config.get("axial_dims"),
            dtype=config["dtype"], name="embeddings")

    def _make_blocks(self, config, count, names=None):
        """`count` distinct blocks with `config`'s sizes and attention option."""
        return encoder_blocks(
            count, num_heads=config["num_heads"], intermediate_dim=config["intermediate_dim"],
            activation=config.get("activation", type(self).activation),
            dropout=config["dropout"], layer_norm_epsilon=config["layer_norm_epsilon"],
            initializer_range=config["initializer_range"], dtype=config["dtype"],
            max_sequence_length=config["max_sequence_length"],
            attention=config.get("attention", "full"), block_size=config.get("block_size", 64),
            num_random_blocks=config.get("num_random_blocks", 3), names=names)

    def _finish_encoder(self, config, embed, layers, *, pooler, causal=False, pool=None,
                        final_norm=None):
        """The functional graph (`encoder_graph`) over `embed` and `layers`,
        then the config record.

        Args:
            pool: `(sequence_output, input_mask) -> [B, H]` replacing the
                first-token `pooled_output` (GPT: the last real token).
            causal, final_norm: as `encoder_graph`.
        """
        self.pooler = None
        if pooler:
            self.pooler = ClsPooler(config["hidden_dim"],
                                    initializer_range=config["initializer_range"],
                                    dtype=config["dtype"], name="pooler")
        inputs, outputs = encoder_graph(embed, layers, self.pooler, causal=causal,
                                        final_norm=final_norm)
        if pool is not None:
            outputs["pooled_output"] = pool(outputs["sequence_output"], inputs["input_mask"])
        Backbone.__init__(self, inputs=inputs, outputs=outputs, dtype=config["dtype"],
                          **config.get("kwargs", {}))
        self._record_config(config)

    def _record_config(self, arguments):
        """Stores every constructor argument (`config_names`) as an
        attribute of the same name, as `get_config` reads them. Subclasses
        call it with `locals()` once their graph is built."""
        for name in self.config_names():
            if name != "dtype":
                setattr(self, name, arguments[name])

    def describe(self):
        """Text block: every config value and a parameter breakdown."""
        lines = [f"{type(self).__name__}"]
        names = [name for name in self.config_names() if name != "dtype"]
        column = max(22, *(len(name) + 1 for name in names))
        for name in names:
            lines.append(f"  {name:<{column}} {getattr(self, name)}")
        parts = self.parameter_parts()
        lines.append("  parameters")
        width = max(20, *(len(label) for label, _ in parts))
        for label, count in parts:
            lines.append(f"    {label:<{width}} {count:>14,}")
        lines.append(f"    {'total':<{width}} {self.count_params():>14,}")
        return "\n".join(lines)

    def parameter_parts(self):
        """[(label, parameter count)] of the model's parts, for `describe`."""
        # ALBERT reuses one block for several layers: count each block once.
        blocks = list({id(layer): layer for layer in self.transformer_layers}.values())
        layers = f"{len(self.transformer_layers)} layers"
        if len(blocks) != len(self.transformer_layers):
            layers += f", {len(blocks)} shared block{'s' if len(blocks) > 1 else ''}"
        parts = [
            ("embeddings", self.embeddings.count_params()),
            (f"encoder ({layers})", sum(block.count_params() for block in blocks)),
        ]
        if getattr(self, "pooler", None) is not None:
            parts.append(("pooler", self.pooler.count_params()))
        return parts

    @property
    def exact_at_any_length(self):
        """Whether a row's outputs are the same however much padding follows
        it (the masks make padding inert), so batches may be cut to their
        longest row (`kerasbert.data.finetuning.padding`). Not with
        BigBird's block-sparse attention, whose pattern (sparse or full)
        follows the padded length; the Reformer says no too."""
        return getattr(self, "attention", "full") == "full"

    @property
    def output_dim(self):
        """Width of `sequence_output` and `pooled_output`, what task heads
        read: hidden_dim, except where a family concatenates streams (the
        Reformer: 2 * hidden_dim)."""
        return self.hidden_dim

    @property
    def token_embedding(self):
        """The `ReversibleEmbedding` heads tie their decoder to."""
        return self.embeddings.token_embedding

    def get_config(self):
        # The functional graph is rebuilt from the constructor arguments, so
        # only those (plus name/trainable/dtype) are stored.
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
        }
        config.update(
            {n: getattr(self, n) for n in self.config_names() if n != "dtype"}
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "dtype" in config and isinstance(config["dtype"], dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)


#: Constructor arguments every encoder family shares for its attention
#: (documented in `attention_options`); part of each backbone's config.
ATTENTION_ARGUMENTS = ("attention", "block_size", "num_random_blocks")


def attention_options(attention, block_size, num_random_blocks, max_sequence_length,
                      layer_index):
    """`TransformerEncoderBlock` keyword arguments for a backbone's attention
    option, the same for every family.

    Args:
        attention: "full" (every token attends every token) or "bigbird"
            (block-sparse: global, sliding-window and random blocks, linear
            memory in T; full attention for inputs up to
            (5 + 2 * num_random_blocks) * block_size tokens). Both build the
            same weights, so a checkpoint serves either.
        block_size, num_random_blocks: BigBird's pattern.
        max_sequence_length: sizes BigBird's random-block table.
        layer_index: seeds the layer's random blocks (one pattern per layer,
            as the original).

    Returns:
        dict for `TransformerEncoderBlock(..., **options)`.
    """
    return dict(attention=attention, block_size=block_size,
                num_random_blocks=num_random_blocks, attention_seed=layer_index,
                max_sequence_length=max_sequence_length)


def encoder_blocks(num_layers, *, num_heads, intermediate_dim, activation, dropout,
                   layer_norm_epsilon, initializer_range, dtype, max_sequence_length,
                   attention="full", block_size=64, num_random_blocks=3, names=None):
    """`num_layers` distinct `TransformerEncoderBlock`s, block i named
    `names[i]` (default `transformer_layer_{i}`, the names the weight
    mappings use), with the backbone's attention option (`attention_options`,
    block i seeding its random blocks). Every family builds its blocks here;
    ALBERT passes its `group_{g}_inner_layer_{r}` names and shares them."""
    names = names or [f"transformer_layer_{i}" for i in range(num_layers)]

    return [
        TransformerEncoderBlock(
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            activation=activation,
            dropout=dropout,
            layer_norm_epsilon=layer_norm_epsilon,
            initializer_range=initializer_range,
            dtype=dtype,
            name=names[i],
            **attention_options(attention, block_size, num_random_blocks,
                                max_sequence_length, i),
        )
        for i in range(num_layers)
    ]


def encoder_graph(embeddings, layers, pooler=None, causal=False, final_norm=None):
    """The functional graph every encoder in the zoo shares.

    input_word_ids, input_mask, input_type_ids (int32 [B, T])
      -> embeddings -> each layer's blocks in turn -> outputs.

    Args:
        embeddings: a `BertEmbeddings` (without a segment table it ignores
            the type ids, which still enter the graph, so every family takes
            the same three inputs).
        layers: one list of blocks per layer; a layer runs its blocks in
            turn and adds one entry to `encoder_outputs`. BERT: one block
            each; ALBERT: the group's blocks, the same objects in every layer
            of the group (cross-layer sharing).
        pooler: a layer on the last hidden state ([B, T, H] -> [B, H]), or
            None: `pooled_output` is then the first token's vector, with no
            weights (RoBERTa, DistilBERT; their classifiers add a dense).
        causal: decoder self-attention (GPT): position t sees only positions
            <= t (`causal_attention_bias`), through the same blocks.
        final_norm: a layer on the last layer's output (pre-LayerNorm
            encoders: ModernBERT); the last `encoder_outputs` entry is then
            normalised too, so it still equals `sequence_output`.

    Returns:
        (inputs, outputs) for `keras.Model.__init__`: outputs are
        `sequence_output` [B, T, H], `pooled_output` [B, H] and
        `encoder_outputs` (a list of len(layers) [B, T, H]).
    """
    inputs = {
        name: keras.Input((None,), dtype="int32", name=name)
        for name in ("input_word_ids", "input_mask", "input_type_ids")
    }
    x = embeddings(inputs["input_word_ids"], inputs["input_type_ids"])
    # One additive bias for all layers, not a [B, T, T] mask per layer.
    make_bias = causal_attention_bias if causal else padding_mask_to_attention_bias
    attention_bias = make_bias(inputs["input_mask"])
    encoder_outputs = []
    for blocks in layers:
        for block in blocks:
            x = block(x, attention_bias=attention_bias)
        encoder_outputs.append(x)
    if final_norm is not None:
        x = encoder_outputs[-1] = final_norm(x)
    pooled = pooler(x) if pooler is not None else x[:, 0, :]
    outputs = {
        "sequence_output": x,
        "pooled_output": pooled,
        "encoder_outputs": encoder_outputs,
    }
    return inputs, outputs
