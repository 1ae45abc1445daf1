"""Reformer architectures (no weights; nothing downloads).

reformer_enwik8 and reformer_crime_and_punishment are the models of the
Hugging Face checkpoints google/reformer-enwik8 and
google/reformer-crime-and-punishment (converted from the authors' trax
models); their weights load with `from_preset("hf://google/reformer-...")`.

- enwik8: character-level (bytes + 2, 258 ids), 12 layers of width 1024
  (8 heads of 128), feed-forward 4096, LSH at layers 2, 6 and 10 (4
  rounds, 512 buckets, chunks of 256) and local attention elsewhere (chunks
  of 128), axial positions 128 x 512 = 65536 of widths 256 + 768:
  148,654,080 parameters without the LM head.
- crime-and-punishment: a 320-piece SentencePiece vocabulary, 6 layers
  alternating local / LSH, width 256 (2 heads of 64), feed-forward 512, 1
  hashing round into 64 x 128 factorised buckets, chunks of 64, axial
  positions 512 x 1024 = 524288 of widths 64 + 192: 2,584,064 parameters
  without the LM head.

Both are causal language models with ReLU feed-forwards and LayerNorm
epsilon 1e-12. The tiny presets keep their shape at sizes a test or a
laptop trains in seconds.
"""

REFORMER_PRETRAINED_BASE = {
    "causal": True, "activation": "relu", "layer_norm_epsilon": 1e-12,
    "num_chunks_before": 1, "num_chunks_after": 0,
}



def _character_model(*, axial_shape, chunk_length, **sizes):
    """A byte-level (`--vocab bytes`) model alternating local and LSH
    layers, both in chunks of `chunk_length`, 2 hashing rounds."""
    return {**REFORMER_PRETRAINED_BASE, "vocabulary_size": 258,
            "max_sequence_length": axial_shape[0] * axial_shape[1], "axial_shape": axial_shape,
            "attention_layers": ["local", "lsh"], "num_hashes": 2,
            "lsh_chunk_length": chunk_length, "local_chunk_length": chunk_length, **sizes}


REFORMER_PRESETS = {
    "reformer_enwik8": {
        "config": {
            **REFORMER_PRETRAINED_BASE,
            "vocabulary_size": 258, "num_layers": 12, "num_heads": 8, "head_dim": 128,
            "hidden_dim": 1024, "intermediate_dim": 4096, "max_sequence_length": 65536,
            "attention_layers": ["local", "local", "lsh", "local", "local", "local", "lsh",
                                 "local", "local", "local", "lsh", "local"],
            "num_hashes": 4, "num_buckets": 512, "lsh_chunk_length": 256,
            "local_chunk_length": 128, "axial_shape": [128, 512], "axial_dims": [256, 768],
            "dropout": 0.2, "attention_dropout": 0.1,
        },
        "description": (
            "Reformer enwik8 (character level, 258 ids), 12 layers, width 1024, 8 heads, "
            "LSH at layers 2/6/10, 65536 axial positions; 148.7M parameters."
        ),
    },
    "reformer_crime_and_punishment": {
        "config": {
            **REFORMER_PRETRAINED_BASE,
            "vocabulary_size": 320, "num_layers": 6, "num_heads": 2, "head_dim": 64,
            "hidden_dim": 256, "intermediate_dim": 512, "max_sequence_length": 524288,
            "attention_layers": ["local", "lsh"], "num_hashes": 1, "num_buckets": [64, 128],
            "lsh_chunk_length": 64, "local_chunk_length": 64, "axial_shape": [512, 1024],
            "axial_dims": [64, 192], "dropout": 0.05, "attention_dropout": 0.0,
        },
        "description": (
            "Reformer crime-and-punishment (SentencePiece, 320 pieces), 6 layers "
            "local/LSH, width 256, 2 heads of 64, 524288 axial positions; 2.6M parameters."
        ),
    },
    "reformer_tiny": {
        "config": _character_model(num_layers=2, num_heads=2, hidden_dim=64,
                                   intermediate_dim=128, axial_shape=[128, 128],
                                   axial_dims=[16, 48], num_buckets=8, chunk_length=32,
                                   dropout=0.0),
        "description": (
            "Tiny character-level Reformer for tests and demos: 2 layers local/LSH, width 64, "
            "16384 axial positions."
        ),
    },
    "reformer_small_char": {
        "config": _character_model(num_layers=6, num_heads=4, hidden_dim=256,
                                   intermediate_dim=1024, axial_shape=[128, 512],
                                   axial_dims=[64, 192], num_buckets=64, chunk_length=64,
                                   dropout=0.1),
        "description": (
            "Small character-level Reformer: 6 layers local/LSH, width 256, 4 heads, "
            "65536 axial positions, for training on one CPU."
        ),
    },
}
