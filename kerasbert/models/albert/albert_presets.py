"""ALBERT architectures (Lan et al., 2019, Table 1; the v2 configs of
google-research/albert): vocabulary 30000 (SentencePiece), embedding 128,
512 positions, one shared block, heads = H / 64 except xxlarge (64 heads of
64), no dropout (v2)."""

# name: (num_layers, hidden_dim, num_heads, parameters at vocabulary 30000)
_SIZES = {
    "albert_base": (12, 768, 12, 11_683_584),
    "albert_large": (24, 1024, 16, 17_683_968),
    "albert_xlarge": (24, 2048, 16, 58_724_864),
    "albert_xxlarge": (12, 4096, 64, 222_595_584),
}

# Exact counts, including the pooler (tests/models/albert check them; they
# equal keras-hub's AlbertBackbone of the same config).
ALBERT_PARAMETER_COUNTS = {name: size[3] for name, size in _SIZES.items()}

ALBERT_PRESETS = {
    name: {
        "config": {
            "vocabulary_size": 30000,
            "num_layers": num_layers,
            "num_heads": num_heads,
            "hidden_dim": hidden_dim,
            "intermediate_dim": 4 * hidden_dim,
            "embedding_dim": 128,
            "num_groups": 1,
            "num_inner_repetitions": 1,
            "max_sequence_length": 512,
            "num_segments": 2,
            "dropout": 0.0,
        },
        "description": (
            f"ALBERT, {num_layers} layers sharing one block, hidden "
            f"{hidden_dim}, {num_heads} heads, embedding 128, "
            f"{count:,} parameters at SentencePiece vocabulary 30000."
        ),
    }
    for name, (num_layers, hidden_dim, num_heads, count) in _SIZES.items()
}
