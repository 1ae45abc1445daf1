"""DistilBERT architectures (Sanh et al., 2019): BERT-Base halved in depth,
no segment embeddings, no pooler."""

DISTIL_BERT_PRESETS = {
    "distilbert_base": {
        "config": {
            "vocabulary_size": 30522,
            "num_layers": 6,
            "num_heads": 12,
            "hidden_dim": 768,
            "intermediate_dim": 3072,
            "max_sequence_length": 512,
            "dropout": 0.1,
        },
        "description": (
            "DistilBERT, 6 layers, hidden 768, 12 heads, uncased English "
            "vocabulary size; 66,362,880 parameters."
        ),
    },
}
