"""Transformer architectures (no weights; nothing downloads).

The models of Vaswani et al. (2017), "Attention Is All You Need", Table 3,
with the 37000-token shared source/target BPE vocabulary of WMT 2014
English-German, post-LN (the paper's layout), 6 encoder + 6 decoder layers,
attention projections without biases, the tied softmax (no extra weights):

transformer_base: d_model 512, d_ff 2048, 8 heads, dropout 0.1:
    37000 * 512                                   = 18,944,000 (shared table)
    6 encoder layers * 3,150,336                  = 18,902,016
      (4 * 512^2 + 2 * 512 * 2048 + 2048 + 512 + 2 LayerNorms 2048)
    6 decoder layers * 4,199,936                  = 25,199,616
      (8 * 512^2 + the same feed-forward + 3 LayerNorms 3072)
    total                                           63,045,632
transformer_big: d_model 1024, d_ff 4096, 16 heads, dropout 0.3 (EN-DE):
    37000 * 1024 + 6 * 12,592,128 + 6 * 16,788,480 = 214,171,648

(the paper's Table 3 rounds its counts: 65M and 213M). With
`norm_first=True` (pre-LN, Model Garden's layout) each stack adds a final
LayerNorm: + 4 * d_model (2,048 base, 4,096 big).
"""

TRANSFORMER_BASE_PARAMETERS = 63_045_632
TRANSFORMER_BIG_PARAMETERS = 214_171_648


def _config(hidden, inner, heads, dropout):
    return {
        "vocabulary_size": 37000,
        "num_layers": 6,
        "num_heads": heads,
        "hidden_dim": hidden,
        "intermediate_dim": inner,
        "dropout": dropout,
        "max_sequence_length": 1024,
        "layer_norm_epsilon": 1e-6,
    }


TRANSFORMER_PRESETS = {
    "transformer_base": {
        "config": _config(512, 2048, 8, 0.1),
        "description": (
            "Transformer base (Vaswani et al. 2017): 6+6 layers, d_model 512, d_ff 2048, "
            "8 heads, shared 37000-token vocabulary, tied softmax; 63,045,632 parameters."
        ),
    },
    "transformer_big": {
        "config": _config(1024, 4096, 16, 0.3),
        "description": (
            "Transformer big (Vaswani et al. 2017): 6+6 layers, d_model 1024, d_ff 4096, "
            "16 heads, shared 37000-token vocabulary, tied softmax; 214,171,648 parameters."
        ),
    },
}
