"""Layer-wise learning-rate decay (LLRD): a variable's depth in the encoder.

Fine-tuning recipes (ELECTRA, Clark et al. 2020; also used for BERT/RoBERTa)
give lower layers a smaller learning rate: a variable at depth `d` trains
with `lr * layer_decay ** (num_layers + 1 - d)`, where

    depth 0               the embeddings (token, position, segment, their
                          LayerNorm, ALBERT's projection),
    depth i + 1           transformer layer i (0-based),
    depth num_layers + 1  everything above the encoder: pooler, task heads
                          (multiplier 1, the full learning rate).

The depth comes from the variable's path. Our `BertBackbone` names its
layers `embeddings/...` and `transformer_layer_<i>/...`; keras-hub backbones
use `token_embedding/...`, `embeddings_layer_norm/...` and the same
`transformer_layer_<i>/...`. Both are recognised, with or without an outer
prefix (a backbone nested in a task model).
"""

import re

_LAYER_PATTERN = re.compile(r"(?:^|/)transformer_layer_(\d+)(?:/|$)")


def _components(variable_path):
    # A tf.Variable name ends in ":0"; the last component is the variable's
    # own name, not a layer.
    path = re.sub(r":\d+$", "", variable_path)
    return path.split("/")[:-1]


def layer_depth(variable_path, num_layers):
    """Depth of a variable in the encoder, from its path.

    Args:
        variable_path: str, e.g. `"transformer_layer_3/intermediate/kernel"`
            (`keras.Variable.path`; a TF variable name with ":0" works too).
        num_layers: int, the number of transformer layers.

    Returns:
        int in [0, num_layers + 1]: 0 for embeddings, i + 1 for transformer
        layer i, num_layers + 1 for anything else (pooler, heads).

    Raises:
        ValueError: the path names a transformer layer >= num_layers.
    """
    match = _LAYER_PATTERN.search(re.sub(r":\d+$", "", variable_path))
    if match:
        index = int(match.group(1))
        if index >= num_layers:
            raise ValueError(
                f"Variable {variable_path!r} belongs to transformer layer "
                f"{index}, but num_layers is {num_layers}."
            )
        return index + 1
    if any("embedding" in part for part in _components(variable_path)):
        return 0
    return num_layers + 1


def layer_decay_multiplier(variable_path, num_layers, layer_decay):
    """`layer_decay ** (num_layers + 1 - depth)`: the factor applied to the
    learning rate of the variable at `variable_path`."""
    depth = layer_depth(variable_path, num_layers)
    return float(layer_decay) ** (num_layers + 1 - depth)


def infer_num_layers(variable_paths):
    """Number of transformer layers named in `variable_paths` (1 + the
    largest `transformer_layer_<i>` index), or None if none is named."""
    indices = [
        int(match.group(1))
        for path in variable_paths
        for match in [_LAYER_PATTERN.search(path)]
        if match
    ]
    return max(indices) + 1 if indices else None
