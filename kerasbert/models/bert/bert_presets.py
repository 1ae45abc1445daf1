"""BERT architectures: the originals and the Small-BERT grid (Turc et al.,
2019). Heads = H / 64 and intermediate = 4H throughout."""

_NAMED_SIZES = {
    "bert_tiny": (2, 128),
    "bert_mini": (4, 256),
    "bert_small": (4, 512),
    "bert_medium": (8, 512),
    "bert_base": (12, 768),
    "bert_large": (24, 1024),
}
_GRID_LAYERS = (2, 4, 6, 8, 10, 12)
_GRID_HIDDEN = (128, 256, 512, 768)


def _config(num_layers, hidden_dim):
    return {
        "vocabulary_size": 30522,
        "num_layers": num_layers,
        "num_heads": hidden_dim // 64,
        "hidden_dim": hidden_dim,
        "intermediate_dim": 4 * hidden_dim,
        "max_sequence_length": 512,
        "num_segments": 2,
        "dropout": 0.1,
    }


def _description(num_layers, hidden_dim):
    return (
        f"BERT, {num_layers} layers, hidden {hidden_dim}, "
        f"{hidden_dim // 64} heads, uncased English vocabulary size."
    )


BERT_PRESETS = {
    name: {"config": _config(l, h), "description": _description(l, h)}
    for name, (l, h) in _NAMED_SIZES.items()
}
BERT_PRESETS.update(
    {
        f"bert_L{l}_H{h}": {
            "config": _config(l, h),
            "description": _description(l, h),
        }
        for l in _GRID_LAYERS
        for h in _GRID_HIDDEN
    }
)
