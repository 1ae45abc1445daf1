"""ELECTRA discriminator architectures (Clark et al., 2020, Table 6; the
google-research/electra configs): uncased English WordPiece vocabulary
(30522), 512 positions, 2 segments, heads = H / 64, intermediate = 4H,
dropout 0.1, erf GELU. Small factorises the embedding (128 -> 256); Base
and Large embed at the hidden width.

The generator is not a preset: `ElectraPretrainer` derives it from the
discriminator (`generator_fraction` of its width; the paper used 1/4 for
Small and Large and 1/3 for Base).
"""

# name: (num_layers, hidden_dim, num_heads, embedding_dim, generator fraction,
#        parameters at vocabulary 30522, pooler included)
_SIZES = {
    "electra_small": (12, 256, 4, 128, 0.25, 13_548_800),
    "electra_base": (12, 768, 12, 768, 1 / 3, 109_482_240),
    "electra_large": (24, 1024, 16, 1024, 0.25, 335_141_888),
}

# Exact counts, including the pooler: they equal keras-hub's ElectraBackbone
# of the same config (tests/models/electra and tests/convert check them).
# Base and Large are BERT-Base and BERT-Large in size.
ELECTRA_PARAMETER_COUNTS = {name: size[5] for name, size in _SIZES.items()}
# The generator width fraction the paper pretrained each size with.
ELECTRA_GENERATOR_FRACTIONS = {name: size[4] for name, size in _SIZES.items()}

ELECTRA_PRESETS = {
    name: {
        "config": {
            "vocabulary_size": 30522,
            "num_layers": num_layers,
            "num_heads": num_heads,
            "hidden_dim": hidden_dim,
            "intermediate_dim": 4 * hidden_dim,
            "embedding_dim": embedding_dim,
            "max_sequence_length": 512,
            "num_segments": 2,
            "dropout": 0.1,
        },
        "description": (
            f"ELECTRA discriminator, {num_layers} layers, hidden {hidden_dim}, "
            f"{num_heads} heads, embedding {embedding_dim}, {count:,} "
            "parameters at vocabulary 30522 (pretrained with a generator "
            f"{'1/3' if fraction > 0.3 else '1/4'} as wide)."
        ),
    }
    for name, (num_layers, hidden_dim, num_heads, embedding_dim, fraction, count)
    in _SIZES.items()
}


def published_generator_fraction(backbone, default=0.25):
    """The generator fraction the paper used for a discriminator of this
    preset's size (matched on layers, hidden and embedding width: Base gets
    1/3), `default` for any other size."""
    for name, preset in ELECTRA_PRESETS.items():
        config = preset["config"]
        if all(config[k] == getattr(backbone, k, None)
               for k in ("num_layers", "hidden_dim", "embedding_dim")):
            return ELECTRA_GENERATOR_FRACTIONS[name]
    return default
