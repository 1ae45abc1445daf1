"""BigBird-RoBERTa architectures of the released checkpoints (Zaheer et
al., 2020; google/bigbird-roberta-base and -large).

BigBird-RoBERTa was warm-started from RoBERTa, but its layout is BERT's: a
4096-row position table starting at position 0, two segment types, a tanh
pooler, post-LayerNorm blocks with the tanh-approximate GELU ("gelu_new"),
LayerNorm epsilon 1e-12, and a 50358-piece SentencePiece vocabulary
(`gpt2.model`, with `[CLS] a [SEP] b [SEP]` packing). Attention is
block-sparse with blocks of 64 tokens and 3 random blocks.

bigbird_roberta_base: 127,468,800 parameters with the pooler (no MLM head).
"""


def _config(num_layers, hidden_dim, num_heads):
    return {
        "vocabulary_size": 50358,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "hidden_dim": hidden_dim,
        "intermediate_dim": 4 * hidden_dim,
        "max_sequence_length": 4096,
        "num_segments": 2,
        "dropout": 0.1,
        "activation": "gelu_approximate",
        "layer_norm_epsilon": 1e-12,
        "attention": "bigbird",
        "block_size": 64,
        "num_random_blocks": 3,
    }


BIG_BIRD_PRESETS = {
    "bigbird_roberta_base": {
        "config": _config(12, 768, 12),
        "description": (
            "BigBird-RoBERTa base, 12 layers, hidden 768, 12 heads, 4096 "
            "positions, block-sparse attention (blocks of 64, 3 random), "
            "SentencePiece vocabulary (50358)."
        ),
    },
    "bigbird_roberta_large": {
        "config": _config(24, 1024, 16),
        "description": (
            "BigBird-RoBERTa large, 24 layers, hidden 1024, 16 heads, 4096 "
            "positions, block-sparse attention (blocks of 64, 3 random), "
            "SentencePiece vocabulary (50358)."
        ),
    },
}
