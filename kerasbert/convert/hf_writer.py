"""Our backbone -> a model directory in the Hugging Face layout, the
inverse of `hf_checkpoint.from_hf_directory` over the same tables
(`hf_layout.ENCODER_LAYOUT`): `config.json`, `model.safetensors` (a
`BertModel`'s names, torch Linear weights [out, in]) and the tokenizer's
files with `tokenizer_config.json`.

BERT is written today; other families are refused with a clear error.
"""

import json
import os
import shutil

from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.hf_layout import ACTIVATIONS
from kerasbert.convert.hf_layout import ENCODER_LAYOUT
from kerasbert.convert.safetensors_files import SINGLE_FILE
from kerasbert.convert.safetensors_files import write_safetensors
from kerasbert.errors import UsageError
from kerasbert.models import BertBackbone

_HF_ACTIVATION = {ours: theirs for theirs, ours in reversed(list(ACTIVATIONS.items()))}


def bert_tensors_to_hf(weights):
    """The canonical BERT dict -> {transformers name: array}."""
    tensors = {
        "embeddings.word_embeddings.weight": weights["word_embeddings"],
        "embeddings.position_embeddings.weight": weights["position_embeddings"],
        "embeddings.token_type_embeddings.weight": weights["type_embeddings"],
        "embeddings.LayerNorm.weight": weights["embeddings_ln_gamma"],
        "embeddings.LayerNorm.bias": weights["embeddings_ln_beta"],
        "pooler.dense.weight": weights["pooler_kernel"].T,
        "pooler.dense.bias": weights["pooler_bias"],
    }
    for i, layer in enumerate(weights["layers"]):
        base = ENCODER_LAYOUT["layer"].format(i=i)
        for key, module in ENCODER_LAYOUT["linear"].items():
            tensors[f"{base}{module}.weight"] = layer[f"{key}_kernel"].T
            tensors[f"{base}{module}.bias"] = layer[f"{key}_bias"]
        for key, module in ENCODER_LAYOUT["norm"].items():
            tensors[f"{base}{module}.weight"] = layer[f"{key}_gamma"]
            tensors[f"{base}{module}.bias"] = layer[f"{key}_beta"]
    return tensors


def bert_config_to_hf(backbone):
    """`BertBackbone` arguments -> a transformers `config.json` dict."""
    return {
        "architectures": ["BertModel"], "model_type": "bert",
        "vocab_size": backbone.vocabulary_size, "hidden_size": backbone.hidden_dim,
        "num_hidden_layers": backbone.num_layers, "num_attention_heads": backbone.num_heads,
        "intermediate_size": backbone.intermediate_dim,
        "hidden_act": _HF_ACTIVATION[backbone.activation],
        "max_position_embeddings": backbone.max_sequence_length,
        "type_vocab_size": backbone.num_segments,
        "hidden_dropout_prob": backbone.dropout, "attention_probs_dropout_prob": backbone.dropout,
        "layer_norm_eps": backbone.layer_norm_epsilon,
        "initializer_range": backbone.initializer_range,
        "pad_token_id": 0,
    }


def write_hf_directory(backbone, directory, vocab_file=None, lower_case=True):
    """Writes `backbone` (and a WordPiece vocab.txt) into `directory`, which
    exists and is empty (the caller makes it atomic).

    Raises:
        UsageError: a family other than BERT, or a factorised embedding.
    """
    if type(backbone) is not BertBackbone or backbone.embedding_dim not in (None,
                                                                           backbone.hidden_dim):
        raise UsageError(f"--to hf writes BertBackbone (without a factorised embedding) "
                         f"today; got a {type(backbone).__name__}. Use --to keras-hub or tf-hub.")
    write_safetensors(os.path.join(directory, SINGLE_FILE),
                      bert_tensors_to_hf(get_bert_weights(backbone)))
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump(bert_config_to_hf(backbone), f, indent=2)
    if vocab_file is not None:
        shutil.copyfile(vocab_file, os.path.join(directory, "vocab.txt"))
        with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"do_lower_case": bool(lower_case), "tokenizer_class": "BertTokenizer"}, f)
