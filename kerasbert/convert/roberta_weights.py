"""RoBERTa weights: keras-hub `RobertaBackbone` <-> kerasbert
`RobertaBackbone`, and the original checkpoints' position tables.

The canonical dict is BERT's (see `bert_weights`) without
`type_embeddings` and without the pooler: RoBERTa has one segment type and
no trained pooler.

Position offset. fairseq (and Hugging Face, which copied it) computes
position ids as `padding_idx + 1 + i` for the i-th real token, with
padding_idx = 1, so real positions start at row 2 and the checkpoints'
tables have `max_sequence_length + 2` = 514 rows; rows 0 and 1 are never
used by a real token. Our table (and keras-hub's) starts at row 0, so
`load_position_embeddings` drops the first `POSITION_OFFSET` = 2 rows.
"""

import numpy as np

from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.bert_weights import set_bert_weights
from kerasbert.convert.hf_layout import Tensors
from kerasbert.convert.hf_layout import encoder_layers
from kerasbert.convert.keras_hub_layout import read_keras_hub
from kerasbert.convert.keras_hub_layout import require_exact
from kerasbert.convert.keras_hub_layout import write_keras_hub

POSITION_OFFSET = 2  # padding_idx (1) + 1 in fairseq / Hugging Face.

def load_position_embeddings(table, max_sequence_length=None):
    """An original (fairseq / Hugging Face layout) position table -> ours.

    Args:
        table: float array [P + 2, H], e.g. 514 rows of
            `roberta.embeddings.position_embeddings.weight`.
        max_sequence_length: optional P to check against (512).

    Returns:
        float array [P, H]: the rows of positions 0..P-1 (rows 2..P+1 of
        the original).
    """
    table = np.asarray(table)
    if table.ndim != 2 or table.shape[0] <= POSITION_OFFSET:
        raise ValueError(
            f"A RoBERTa position table is [max_sequence_length + "
            f"{POSITION_OFFSET}, hidden]; got shape {table.shape}."
        )
    rows = table[POSITION_OFFSET:]
    if max_sequence_length is not None and rows.shape[0] != max_sequence_length:
        raise ValueError(
            f"The position table has {table.shape[0]} rows = "
            f"{rows.shape[0]} positions + {POSITION_OFFSET} offset rows, "
            f"but max_sequence_length is {max_sequence_length}."
        )
    return rows


def save_position_embeddings(table):
    """Ours [P, H] -> the original layout [P + 2, H]. The two offset rows
    are never read by a real token; they are written as zeros (row 1 is the
    padding row, zero in the released checkpoints too)."""
    table = np.asarray(table)
    pad = np.zeros((POSITION_OFFSET, table.shape[1]), table.dtype)
    return np.concatenate([pad, table], axis=0)


# --- our backbone -------------------------------------------------------


# --- keras-hub ------------------------------------------------------------


def _config_of(backbone):
    keys = (
        "vocabulary_size", "num_layers", "num_heads", "hidden_dim",
        "intermediate_dim", "max_sequence_length", "dropout",
    )
    return {k: getattr(backbone, k) for k in keys}


def roberta_from_keras_hub(peer):
    """Converts a `keras_hub.models.RobertaBackbone` into ours.

    Same architecture, weights and activation (erf GELU, LayerNorm eps
    1e-5): outputs agree to float32 rounding. keras-hub's inputs map to ours
    as token_ids -> input_word_ids, padding_mask -> input_mask (pass zeros
    as input_type_ids); its single output is our `sequence_output`.
    """
    from kerasbert.models.roberta import RobertaBackbone  # lazy: keras

    weights = read_keras_hub(peer, "RobertaBackbone")
    ours = RobertaBackbone(**_config_of(peer), dtype=peer.dtype_policy)
    return set_bert_weights(ours, weights)


def roberta_to_keras_hub(ours):
    """Converts our `RobertaBackbone` into a `keras_hub.models.
    RobertaBackbone`. What keras-hub fixes in code
    (activation, LayerNorm epsilon) must match: `require_exact` raises
    otherwise."""
    import keras_hub

    require_exact(ours, "RobertaBackbone")
    weights = get_bert_weights(ours)
    peer = keras_hub.models.RobertaBackbone(
        **_config_of(ours), dtype=ours.dtype_policy
    )
    return write_keras_hub(peer, "RobertaBackbone", weights)


# --- Hugging Face layout ----------------------------------------------------


def roberta_weights_from_hf(state_dict, max_sequence_length=None):
    """A Hugging Face `RobertaModel` state dict -> the canonical dict.

    Names may carry the "roberta." prefix (`RobertaForMaskedLM` etc.) or
    not; values are arrays (`tensor.numpy()`). torch `Linear` weights are
    [out, in] and are transposed (`hf_layout`); the 514-row position table
    loses its two offset rows (`load_position_embeddings`). Token type
    embeddings (one row, added to every token) are folded into the position
    table, where they have the same effect, and the pooler is dropped
    (keras-hub's RoBERTa has none either).

    Returns:
        the canonical dict, for `bert_weights.set_bert_weights`.
    """
    tensors = Tensors(state_dict, "the state dict")
    positions = load_position_embeddings(
        tensors.get("embeddings.position_embeddings.weight"), max_sequence_length
    )
    if tensors.has("embeddings.token_type_embeddings.weight"):
        types = tensors.get("embeddings.token_type_embeddings.weight")
        if types.shape[0] != 1:
            raise ValueError(
                f"{tensors.prefix}embeddings.token_type_embeddings.weight has "
                f"{types.shape[0]} rows; RoBERTa has one segment type and this backbone "
                "no segment table."
            )
        positions = positions + types[0]
    gamma, beta = tensors.layer_norm("embeddings.LayerNorm")
    return {
        "word_embeddings": tensors.get("embeddings.word_embeddings.weight"),
        "position_embeddings": positions,
        "embeddings_ln_gamma": gamma,
        "embeddings_ln_beta": beta,
        "layers": encoder_layers(tensors),
    }
