"""What a backbone's configuration may be, checked before anything is
built: the value rules every family shares (`validate_config`, the
family's own `check_config` on top), preset overrides, the memory a model's
weights need against what this process may use (`memory_budget`), the sizes
a checkpoint's config declares against what its files store, and a
tokenizer against the embedding table."""

import math
import os
import re
import resource

from kerasbert.errors import CheckpointError
from kerasbert.errors import UsageError
from kerasbert.layers.activations import activation_names
from kerasbert.models.presets import get_preset
from kerasbert.models.presets import is_preset


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
