"""GPT architectures (no weights; nothing downloads).

gpt1 is the model of Radford et al. (2018), "Improving Language
Understanding by Generative Pre-Training" (openai/finetune-transformer-lm):
12 layers, hidden 768, 12 heads, feed-forward 3072, 512 positions, a
40478-token BPE vocabulary, no embedding LayerNorm, no final LayerNorm:
40478 * 768 + 512 * 768 + 12 * 7,087,872 = 116,534,784 parameters.
"""

GPT_PRESETS = {
    "gpt1": {
        "config": {
            "vocabulary_size": 40478,
            "num_layers": 12,
            "num_heads": 12,
            "hidden_dim": 768,
            "intermediate_dim": 3072,
            "max_sequence_length": 512,
            "dropout": 0.1,
            "layer_norm_epsilon": 1e-5,
            "activation": "gelu_approximate",
        },
        "description": (
            "GPT-1 causal decoder, 12 layers, hidden 768, 12 heads, 512 "
            "positions, BPE vocabulary (40478); 116.5M parameters."
        ),
    },
}
