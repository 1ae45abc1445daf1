"""ELMo architectures (no weights; nothing downloads): the three biLMs that
AllenNLP published with the paper (Peters et al. 2018), named after their
files `elmo_2x{lstm_dim}_{projection_dim}_2048cnn_{n}xhighway`. All share the
character CNN of 2048 filters (widths 1-7: 32, 32, 64, 128, 256, 512, 1024
filters) over 16-wide embeddings of 261 character ids, relu, and two LSTM
layers per direction with cell and projection clips of 3.

Parameter counts (the published convention: the softmax over the word
vocabulary excluded; `ElmoBackbone.bilm_parameters`, equal to the built
model's weights without its 4 scalar-mix numbers):

    elmo_small     1 highway, 1024 cells -> 128    13,593,296   (13.6M)
    elmo_medium    1 highway, 2048 cells -> 256    28,027,728   (28.0M)
    elmo_original  2 highway, 4096 cells -> 512    93,600,848   (93.6M)
"""

_SHARED = {
    "num_layers": 2,
    "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
    "activation": "relu",
    "num_characters": 262,
    "character_embedding_dim": 16,
    "max_characters_per_token": 50,
    "cell_clip": 3.0,
    "projection_clip": 3.0,
    "use_skip_connections": True,
}


def _preset(lstm_dim, projection_dim, num_highway, count, published):
    return {
        "config": {**_SHARED, "lstm_dim": lstm_dim, "projection_dim": projection_dim,
                   "num_highway": num_highway},
        "description": (
            f"ELMo biLM, char CNN (2048 filters), {num_highway} highway, 2 x "
            f"{lstm_dim}-cell LSTMs projected to {projection_dim} per direction; "
            f"{count:,} parameters ({published}, softmax excluded)."),
    }


ELMO_PRESETS = {
    "elmo_small": _preset(1024, 128, 1, 13_593_296, "13.6M"),
    "elmo_medium": _preset(2048, 256, 1, 28_027_728, "28.0M"),
    "elmo_original": _preset(4096, 512, 2, 93_600_848, "93.6M"),
}
