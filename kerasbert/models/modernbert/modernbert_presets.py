"""ModernBERT architectures of the released checkpoints (answerdotai,
Dec 2024), as their config.json files give them.

Both use OLMo's byte-level BPE, padded to 50,368 rows (a multiple of 64),
8,192 positions (rotary: no table), local windows of 128 and a global layer
every third. Parameter counts, read from the published tensors'
shapes and equal to `count_params()` here (encoder only; the masked-LM
head adds H x H + H + 50,368):

    modernbert_base   149,014,272  (ModernBertForMaskedLM: 149,655,232)
    modernbert_large  394,781,696  (ModernBertForMaskedLM: 395,831,872)
"""


def _config(num_layers, hidden_dim, intermediate_dim, num_heads):
    return {
        "vocabulary_size": 50368,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "hidden_dim": hidden_dim,
        "intermediate_dim": intermediate_dim,
        "max_sequence_length": 8192,
        "dropout": 0.0,
        "layer_norm_epsilon": 1e-5,
        "global_attn_every_n_layers": 3,
        "local_attention": 128,
        "global_rope_theta": 160000.0,
        "local_rope_theta": 10000.0,
    }


MODERNBERT_PRESETS = {
    "modernbert_base": {
        "config": _config(22, 768, 1152, 12),
        "description": (
            "ModernBERT base, 22 layers, hidden 768, GeGLU 1152, 12 heads, 8192 tokens, "
            "cased byte-level BPE vocabulary (50368)."
        ),
    },
    "modernbert_large": {
        "config": _config(28, 1024, 2624, 16),
        "description": (
            "ModernBERT large, 28 layers, hidden 1024, GeGLU 2624, 16 heads, 8192 tokens, "
            "cased byte-level BPE vocabulary (50368)."
        ),
    },
}
