"""The numeric and named fields of Hugging Face `config.json` files, checked
for type and range before any value is used (`check_hf_config`), and the
field each of our arguments comes from, per `model_type` (`hf_names`, for
messages about a config.json)."""

import math

from kerasbert.convert.safetensors_files import CheckpointError

#: The numeric fields of the families' config.json files, checked for type
#: and range before anything reads them (`check_hf_config`): kind ("int",
#: "rate" in [0, 1), "positive" finite float, "ints" a list of ints,
#: "buckets" an int or a list of ints) and the least value.
HF_FIELDS = {
    # BERT, RoBERTa, ELECTRA, BigBird, ALBERT
    "vocab_size": ("int", 1), "hidden_size": ("int", 1), "num_hidden_layers": ("int", 1),
    "num_attention_heads": ("int", 1), "intermediate_size": ("int", 1),
    "max_position_embeddings": ("int", 1), "type_vocab_size": ("int", 0),
    "embedding_size": ("int", 1), "num_hidden_groups": ("int", 1), "inner_group_num": ("int", 1),
    "block_size": ("int", 1), "num_random_blocks": ("int", 0),
    "hidden_dropout_prob": ("rate", 0), "attention_probs_dropout_prob": ("rate", 0),
    "layer_norm_eps": ("positive", 0), "initializer_range": ("positive", 0),
    # DistilBERT ("hidden_dim" is its feed-forward width)
    "n_layers": ("int", 1), "n_heads": ("int", 1), "dim": ("int", 1), "hidden_dim": ("int", 1),
    "dropout": ("rate", 0), "attention_dropout": ("rate", 0),
    # GPT-1
    "n_layer": ("int", 1), "n_head": ("int", 1), "n_embd": ("int", 1), "n_positions": ("int", 1),
    "resid_pdrop": ("rate", 0), "attn_pdrop": ("rate", 0), "embd_pdrop": ("rate", 0),
    "layer_norm_epsilon": ("positive", 0),
    # Reformer
    "feed_forward_size": ("int", 1), "attention_head_size": ("int", 1), "num_hashes": ("int", 1),
    "lsh_attn_chunk_length": ("int", 1), "local_attn_chunk_length": ("int", 1),
    "lsh_num_chunks_before": ("int", 0), "lsh_num_chunks_after": ("int", 0),
    "local_num_chunks_before": ("int", 0), "local_num_chunks_after": ("int", 0),
    "axial_pos_shape": ("ints", 1), "axial_pos_embds_dim": ("ints", 1),
    "num_buckets": ("buckets", 1), "lsh_attention_probs_dropout_prob": ("rate", 0),
    "local_attention_probs_dropout_prob": ("rate", 0),
    # ModernBERT (and BERT's "attention_dropout" above)
    "norm_eps": ("positive", 0), "local_attention": ("int", 2), "sliding_window": ("int", 1),
    "global_attn_every_n_layers": ("int", 1), "global_rope_theta": ("positive", 0),
    "local_rope_theta": ("positive", 0), "embedding_dropout": ("rate", 0),
    "mlp_dropout": ("rate", 0),
}

#: Our argument -> the config.json field it comes from, per model_type
#: where it differs from BERT's names (for messages about a config.json).
HF_NAMES = {
    "bert": {"vocabulary_size": "vocab_size", "num_layers": "num_hidden_layers",
             "num_heads": "num_attention_heads", "hidden_dim": "hidden_size",
             "intermediate_dim": "intermediate_size",
             "max_sequence_length": "max_position_embeddings", "num_segments": "type_vocab_size",
             "embedding_dim": "embedding_size", "num_groups": "num_hidden_groups",
             "num_inner_repetitions": "inner_group_num", "dropout": "hidden_dropout_prob",
             "layer_norm_epsilon": "layer_norm_eps"},
    "distilbert": {"vocabulary_size": "vocab_size", "num_layers": "n_layers",
                   "num_heads": "n_heads", "hidden_dim": "dim", "intermediate_dim": "hidden_dim",
                   "max_sequence_length": "max_position_embeddings"},
    "openai-gpt": {"vocabulary_size": "vocab_size", "num_layers": "n_layer",
                   "num_heads": "n_head", "hidden_dim": "n_embd",
                   "max_sequence_length": "n_positions"},
    "reformer": {"vocabulary_size": "vocab_size", "num_layers": "attn_layers",
                 "num_heads": "num_attention_heads", "hidden_dim": "hidden_size",
                 "intermediate_dim": "feed_forward_size", "head_dim": "attention_head_size",
                 "max_sequence_length": "axial_pos_shape", "axial_shape": "axial_pos_shape",
                 "axial_dims": "axial_pos_embds_dim", "lsh_chunk_length": "lsh_attn_chunk_length",
                 "local_chunk_length": "local_attn_chunk_length",
                 "num_chunks_before": "lsh_num_chunks_before",
                 "num_chunks_after": "lsh_num_chunks_after"},
    "modernbert": {"vocabulary_size": "vocab_size", "num_layers": "num_hidden_layers",
                   "num_heads": "num_attention_heads", "hidden_dim": "hidden_size",
                   "intermediate_dim": "intermediate_size",
                   "max_sequence_length": "max_position_embeddings",
                   "layer_norm_epsilon": "norm_eps", "dropout": "attention_dropout"},
}


def hf_names(model_type):
    """{our argument: config.json field} of a model_type (BERT's names for
    the families that share them)."""
    return HF_NAMES.get(model_type, HF_NAMES["bert"])


def _bad_value(kind, value, least):
    def is_int(v):
        return isinstance(v, int) and not isinstance(v, bool)

    if kind == "int":
        return not (is_int(value) and value >= least)
    if kind == "ints":
        return not (isinstance(value, list) and value and all(
            is_int(v) and v >= least for v in value))
    if kind == "buckets":
        return not (is_int(value) and value >= least) and not (
            isinstance(value, list) and value and all(is_int(v) and v >= least for v in value))
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "rate":
        return not (number and 0 <= value < 1)
    return not (number and math.isfinite(value) and value > 0)  # "positive"


_EXPECTED = {"int": "an integer >= {least}", "ints": "a list of integers >= {least}",
             "buckets": "an integer >= {least} or a list of them",
             "rate": "a number in [0, 1)", "positive": "a finite number > 0"}


def check_hf_config(config, where):
    """Refuses a config field of the wrong type or out of range
    (`HF_FIELDS`) before any value is used, naming `where` (the file), the
    field and the value; `attn_layers` must be a list of names."""
    for key, (kind, least) in HF_FIELDS.items():
        if key in config and _bad_value(kind, config[key], least):
            raise CheckpointError(f"{where}: {key}={config[key]!r}: must be "
                                  f"{_EXPECTED[kind].format(least=least)}.")
    layers = config.get("attn_layers", [])
    if not isinstance(layers, list) or not all(isinstance(k, str) for k in layers):
        raise CheckpointError(f"{where}: attn_layers={layers!r}: must be a list of attention "
                              "names (\"lsh\", \"local\").")
