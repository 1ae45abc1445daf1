"""Base class of every backbone: presets, config, the shared embedding."""

import inspect
import math
import os
import re
import resource

import keras

from kerasbert.errors import CheckpointError
from kerasbert.errors import UsageError
from kerasbert.layers import BertEmbeddings
from kerasbert.layers import ClsPooler
from kerasbert.layers import TransformerEncoderBlock
from kerasbert.layers import causal_attention_bias
from kerasbert.layers import padding_mask_to_attention_bias
from kerasbert.layers.activations import activation_names
from kerasbert.layers.early_attributes import EarlyAttributes
from kerasbert.models.presets import get_preset
from kerasbert.models.presets import is_preset
from kerasbert.models.presets import load_from_source


class ConfigError(UsageError, ValueError):
    """An architecture that cannot be built (a zero or negative size, a
    hidden size the heads do not divide, a dropout rate outside [0, 1)).
    A `UsageError` for the command line, a `ValueError` for Python callers.
    The message names the key and the value."""


# Integer sizes and the least value each may take (a key a family lacks is
# skipped; None is allowed where the constructor's default is None). The
# Reformer's names are its own, so one table serves every family and an
# override is checked the same way whatever it is applied to.
_INT_MINIMUMS = {
    "vocabulary_size": 1, "num_layers": 1, "num_heads": 1, "hidden_dim": 1,
    "intermediate_dim": 1, "max_sequence_length": 1, "embedding_dim": 1,
    "num_groups": 1, "num_inner_repetitions": 1, "block_size": 1,
    "num_segments": 0, "num_random_blocks": 0,
    # the Reformer's
    "head_dim": 1, "num_hashes": 1, "lsh_chunk_length": 1, "local_chunk_length": 1,
    "num_chunks_before": 0, "num_chunks_after": 0, "feed_forward_chunk_size": 0,
}
_RATES = ("dropout", "attention_dropout")
_BOOLEANS = ("causal", "recompute")
ATTENTION_KINDS = ("full", "bigbird")


def _check_int(key, value, least):
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{key}={value!r}: must be an integer >= {least}.")


def _check_rate(key, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ConfigError(f"{key}={value!r}: must be a number in [0, 1).")


def _check_positive(key, value):
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value <= 0):
        raise ConfigError(f"{key}={value!r}: must be a finite number > 0.")


def validate_config(config, cls=None):
    """Refuses, before any layer is built, a config no model can have.

    Args:
        config: a backbone's constructor arguments (any family: keys it
            does not use are absent and skipped), or overrides alone (each
            value is checked by its key).
        cls: the backbone class, whose `check_config` adds the family's
            rules between values (the Reformer's buckets and axial shape,
            ALBERT's groups).

    Raises:
        ConfigError: naming the first bad key and its value.
    """
    for key, least in _INT_MINIMUMS.items():
        if key in config:
            _check_int(key, config[key], least)
    for key in _RATES:
        if key in config:
            _check_rate(key, config[key])
    for key in ("layer_norm_epsilon", "initializer_range"):
        if key in config:
            _check_positive(key, config[key])
    for key in _BOOLEANS:
        if key in config and not isinstance(config[key], bool):
            raise ConfigError(f"{key}={config[key]!r}: must be true or false.")
    if "activation" in config and config["activation"] not in activation_names():
        raise ConfigError(f"activation={config['activation']!r}: Unknown activation; "
                          f"expected one of {', '.join(activation_names())}.")
    if "attention" in config and config["attention"] not in ATTENTION_KINDS:
        raise ConfigError(f"attention={config['attention']!r}: must be one of "
                          f"{', '.join(ATTENTION_KINDS)}.")
    hidden, heads = config.get("hidden_dim"), config.get("num_heads")
    # An explicit head width (the Reformer's head_dim) frees hidden_dim.
    if hidden is not None and heads is not None and hidden % heads and not config.get("head_dim"):
        raise ConfigError(f"hidden_dim={hidden} is not divisible by num_heads={heads}: "
                          "each head gets hidden_dim / num_heads features.")
    if cls is not None:
        cls.check_config(config)


def check_overrides(name, overrides):
    """`--set` overrides checked before any work (a command calls this
    before it creates anything): on a preset name, everything `from_preset`
    checks, nothing built; on a handle to weights, each value by its key
    (the family's rules between values run when the weights are read).

    Raises:
        UsageError: naming the key and the value.
    """
    try:
        if is_preset(name):
            get_preset(name)["backbone_class"].preset_config(name, **overrides)
        else:
            validate_config(overrides)
    except (ValueError, TypeError) as err:
        raise UsageError(str(err)) from None


#: Overrides whose type may differ from the preset's (the Reformer's
#: factorised bucket pair for an int): `check_config` checks them; every
#: other override must have its preset value's type, then `validate_config`.
CHECKED_KEYS = frozenset({"num_buckets", "axial_shape", "axial_dims", "attention_layers",
                          "head_dim"})


#: Where the memory budget comes from: bytes, or with a K/M/G/T suffix.
MEMORY_BUDGET_VARIABLE = "KERASBERT_MEMORY_BUDGET"
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def memory_budget():
    """(bytes a model's weights may take, where that number comes from):
    $KERASBERT_MEMORY_BUDGET when set, else the least of this machine's
    memory (or its container's limit), the memory available now, and the
    address space this process may still take (its `ulimit -v`)."""
    text = os.environ.get(MEMORY_BUDGET_VARIABLE, "").strip()
    if text:
        match = re.fullmatch(r"(\d+(?:\.\d*)?)\s*([KMGT]?)i?B?", text, re.IGNORECASE)
        value = float(match[1]) * _UNITS[match[2].upper()] if match else 0
        if value < 1:
            raise ConfigError(f"{MEMORY_BUDGET_VARIABLE}={text!r}: expected a size in bytes, "
                              "e.g. 8G or 500M.")
        return int(value), f"${MEMORY_BUDGET_VARIABLE}"
    limits = [(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "this machine's memory")]
    container = _read_number("/sys/fs/cgroup/memory.max")
    if container is not None:
        limits.append((container, "this container's memory limit"))
    available = _meminfo_bytes("/proc/meminfo", "MemAvailable")
    if available is not None:
        limits.append((available, "this machine's available memory"))
    address_space = resource.getrlimit(resource.RLIMIT_AS)[0]
    if address_space != resource.RLIM_INFINITY:
        used = _meminfo_bytes("/proc/self/status", "VmSize") or 0
        limits.append((max(address_space - used, 0),
                       "the address space left under this process's limit (ulimit -v)"))
    budget, source = min(limits)
    return budget, f"{source}; set ${MEMORY_BUDGET_VARIABLE} to change it"


def _read_number(path):
    try:
        with open(path, encoding="ascii") as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _meminfo_bytes(path, key):
    """A "Key:   N kB" line of /proc/meminfo or /proc/self/status, in bytes."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name == key and value.split()[0].isdigit():
                    return int(value.split()[0]) * 1024
    except OSError:
        return None
    return None


def check_memory(cls, config, where=""):
    """Refuses a config whose weights alone (float32) exceed `memory_budget`,
    before anything is allocated.

    Raises:
        ConfigError: naming the sizes, the parameter count and the budget.
    """
    count = cls.estimate_parameters(config)
    budget, source = memory_budget()
    if 4 * count > budget:
        sizes = ", ".join(f"{k}={config[k]}" for k in _SIZE_KEYS if config.get(k) is not None)
        raise ConfigError(f"{where}{sizes}: {count:,} parameters, {4 * count / 2**30:,.1f} GiB "
                          f"of float32 weights, more than the memory budget of "
                          f"{budget / 2**30:,.1f} GiB ({source}).")
    return count


_SIZE_KEYS = ("vocabulary_size", "num_layers", "hidden_dim", "intermediate_dim",
              "max_sequence_length", "embedding_dim", "num_segments")

#: The sizes without which no parameter count can be declared.
_ESSENTIAL_SIZES = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim",
                    "intermediate_dim")


def stored_config_arguments(cls, config, where=""):
    """A checkpoint's stored backbone config as `cls`'s constructor
    arguments: its keys that `cls` takes over `cls`'s defaults, no dtype,
    validated (`validate_config`) before anything is built.

    Returns:
        The arguments; None when one of the sizes a parameter count needs
        is missing (the constructor names it when the model is built).

    Raises:
        CheckpointError: `where` + the first bad key and its value.
    """
    arguments = {k: v for k, v in config.items() if k in cls.config_names() and k != "dtype"}
    arguments = {**cls.default_config(), **arguments}
    arguments.pop("dtype", None)
    try:
        validate_config(arguments, cls)
    except ConfigError as err:
        raise CheckpointError(f"{where}{err}") from None
    if not all(k in arguments for k in _ESSENTIAL_SIZES):
        return None
    return arguments


def check_stored_parameters(cls, arguments, stored_values, where, stored_in, names=None):
    """Refuses a config that declares more parameters than its weight files
    store (a published checkpoint stores its weights), then one past the
    memory budget (`check_memory`): a load never takes more memory than the
    files plus the model they hold.

    The slack, 10% plus a hidden x hidden matrix with its vectors and two
    embedding rows, covers what a checkpoint may lack that our backbone
    has (masked-LM checkpoints without a pooler, GPT's un-normalised
    embedding without a LayerNorm) and rounding between families.

    Args:
        stored_values: how many values the weight files hold.
        where: what the message starts with (the file), e.g. "DIR: ".
        stored_in: the weight files and a verb, as the message names them
            before the count ("model.safetensors stores").
        names: {our key: the file's key} for the sizes the message lists.

    Returns:
        The declared parameter count.

    Raises:
        CheckpointError: naming the sizes and both counts.
    """
    declared = cls.estimate_parameters(arguments)
    hidden = arguments["hidden_dim"]
    width = arguments.get("embedding_dim") or hidden
    if declared > 1.1 * stored_values + hidden * (hidden + 3) + 2 * width:
        names = names or {}
        sizes = ", ".join(f"{names.get(k, k)}={arguments[k]}" for k in _SIZE_KEYS
                          if arguments.get(k) is not None)
        raise CheckpointError(
            f"{where}{sizes}: declares a {cls.__name__} of {declared:,} parameters but "
            f"{stored_in} {stored_values:,} values; a published checkpoint stores its "
            "weights, so this config does not describe them.")
    try:
        check_memory(cls, arguments, where)
    except ConfigError as err:
        raise CheckpointError(str(err)) from None
    return declared


def check_tokenizer_fits(tokenizer, backbone, what="The tokenizer"):
    """Refuses a tokenizer that makes ids the backbone has no embedding row
    for (an id past the table is a graph error deep in the first batch, or
    a silent zero vector on some devices). A backbone without a token table
    (ELMo reads characters) takes any tokenizer.

    Raises:
        UsageError: naming both sizes.
    """
    rows = getattr(backbone, "vocabulary_size", None)
    if rows is not None and tokenizer.vocabulary_size > int(rows):
        raise UsageError(f"{what} has {tokenizer.vocabulary_size} tokens but the model's "
                         f"embedding has {int(rows)} rows: they are not one model's (give the "
                         "model's own vocabulary).")


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

    def _finish_encoder(self, config, embed, layers, *, pooler, causal=False, pool=None):
        """The functional graph (`encoder_graph`) over `embed` and `layers`,
        then the config record.

        Args:
            pool: `(sequence_output, input_mask) -> [B, H]` replacing the
                first-token `pooled_output` (GPT: the last real token).
            causal: decoder attention (`encoder_graph`).
        """
        self.pooler = None
        if pooler:
            self.pooler = ClsPooler(config["hidden_dim"],
                                    initializer_range=config["initializer_range"],
                                    dtype=config["dtype"], name="pooler")
        inputs, outputs = encoder_graph(embed, layers, self.pooler, causal=causal)
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
        for name in self.config_names():
            if name == "dtype":
                continue
            lines.append(f"  {name:<22} {getattr(self, name)}")
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


def encoder_graph(embeddings, layers, pooler=None, causal=False):
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
    pooled = pooler(x) if pooler is not None else x[:, 0, :]
    outputs = {
        "sequence_output": x,
        "pooled_output": pooled,
        "encoder_outputs": encoder_outputs,
    }
    return inputs, outputs
