"""RoBERTa architectures of the released checkpoints (Liu et al., 2019).

Vocabulary 50265 (GPT-2's byte-level BPE plus <s>, <pad>, </s>, <unk>,
<mask>) and 512 usable positions (the checkpoints' 514-row tables minus the
two offset rows). Parameter counts equal keras-hub's: roberta_base
124,052,736, roberta_large 354,307,072 (no pooler, no MLM head).
"""


def _config(num_layers, hidden_dim, num_heads):
    return {
        "vocabulary_size": 50265,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "hidden_dim": hidden_dim,
        "intermediate_dim": 4 * hidden_dim,
        "max_sequence_length": 512,
        "dropout": 0.1,
    }


ROBERTA_PRESETS = {
    "roberta_base": {
        "config": _config(12, 768, 12),
        "description": (
            "RoBERTa base, 12 layers, hidden 768, 12 heads, cased byte-level "
            "BPE vocabulary (50265)."
        ),
    },
    "roberta_large": {
        "config": _config(24, 1024, 16),
        "description": (
            "RoBERTa large, 24 layers, hidden 1024, 16 heads, cased "
            "byte-level BPE vocabulary (50265)."
        ),
    },
}
