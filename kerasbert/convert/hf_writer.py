"""Our backbone -> a model directory in the Hugging Face layout, the
inverse of `hf_checkpoint.from_hf_directory` over the same tables
(`hf_layout.ENCODER_LAYOUT`): `config.json`, `model.safetensors` (a
`BertModel`'s names, torch Linear weights [out, in]) and the tokenizer's
files with `tokenizer_config.json`.

BERT, RoBERTa, DistilBERT, ELECTRA, ALBERT, BigBird, GPT-1
(`openai-gpt`) and ModernBERT (the published names and config.json form,
`modernbert_weights`; its tokenizer.json copied) are written (RoBERTa's position table gets back its two
offset rows, and its one-row token-type table is zero: reading folds it
into the positions; GPT-1's special tokens appended for fine-tuning are
listed in added_tokens.json, as transformers' tokenizers keep them).
"""

import json
import math
import os
import shutil

import numpy as np

from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.hf_layout import ACTIVATIONS
from kerasbert.convert.albert_weights import get_albert_weights
from kerasbert.convert.hf_layout import ALBERT_LAYOUT
from kerasbert.convert.hf_layout import DISTILBERT_LAYOUT
from kerasbert.convert.hf_layout import ENCODER_LAYOUT
from kerasbert.convert.hf_layout import GPT_ACTIVATIONS
from kerasbert.convert.hf_layout import GPT_BLOCK
from kerasbert.convert.modernbert_weights import modernbert_config_to_hf
from kerasbert.convert.modernbert_weights import modernbert_tensors_to_hf
from kerasbert.convert.safetensors_files import SINGLE_FILE
from kerasbert.convert.safetensors_files import write_safetensors
from kerasbert.errors import UsageError
from kerasbert.models import AlbertBackbone
from kerasbert.models import BertBackbone
from kerasbert.models import BigBirdBackbone
from kerasbert.models import DistilBertBackbone
from kerasbert.models import ElectraBackbone
from kerasbert.models import GptBackbone
from kerasbert.models import ModernBertBackbone
from kerasbert.models import RobertaBackbone

_HF_ACTIVATION = {ours: theirs for theirs, ours in reversed(list(ACTIVATIONS.items()))}


def encoder_tensors_to_hf(weights, layout=ENCODER_LAYOUT, prefix=""):
    """The canonical dict -> {transformers name: array}: the embeddings (and
    the segment table, pooler and ELECTRA's `embeddings_project` where the
    dict has them) and every layer of `layout`, under `prefix`."""
    tensors = {
        "embeddings.word_embeddings.weight": weights["word_embeddings"],
        "embeddings.position_embeddings.weight": weights["position_embeddings"],
        "embeddings.LayerNorm.weight": weights["embeddings_ln_gamma"],
        "embeddings.LayerNorm.bias": weights["embeddings_ln_beta"],
    }
    if weights.get("type_embeddings") is not None:
        tensors["embeddings.token_type_embeddings.weight"] = weights["type_embeddings"]
    if weights.get("pooler_kernel") is not None:
        tensors["pooler.dense.weight"] = weights["pooler_kernel"].T
        tensors["pooler.dense.bias"] = weights["pooler_bias"]
    if weights.get("embedding_projection_kernel") is not None:
        tensors["embeddings_project.weight"] = weights["embedding_projection_kernel"].T
        tensors["embeddings_project.bias"] = weights["embedding_projection_bias"]
    for i, layer in enumerate(weights["layers"]):
        tensors.update(_block_tensors(layout, layout["layer"].format(i=i), layer))
    return {prefix + name: value for name, value in tensors.items()}


def _block_tensors(layout, base, layer):
    """One encoder block's canonical weights -> {name under `base`: array}
    (Linear weights transposed to torch's [out, in])."""
    tensors = {}
    for key, module in layout["linear"].items():
        tensors[f"{base}{module}.weight"] = layer[f"{key}_kernel"].T
        tensors[f"{base}{module}.bias"] = layer[f"{key}_bias"]
    for key, module in layout["norm"].items():
        tensors[f"{base}{module}.weight"] = layer[f"{key}_gamma"]
        tensors[f"{base}{module}.bias"] = layer[f"{key}_beta"]
    return tensors


def bert_tensors_to_hf(weights):
    """The canonical BERT dict -> {transformers name: array} (`BertModel`)."""
    return encoder_tensors_to_hf(weights)


def distilbert_tensors_to_hf(weights):
    """The canonical DistilBERT dict -> names under "distilbert.", as the
    published DistilBertForMaskedLM files have them."""
    return encoder_tensors_to_hf(dict(weights, pooler_kernel=None), DISTILBERT_LAYOUT,
                                 "distilbert.")


def electra_tensors_to_hf(weights):
    """The canonical ELECTRA dict -> names under "electra." (no pooler: the
    published discriminators have none)."""
    return encoder_tensors_to_hf(dict(weights, pooler_kernel=None), prefix="electra.")


def albert_tensors_to_hf(weights):
    """The canonical ALBERT dict ("groups" of distinct blocks, the
    factorised embedding's projection) -> names under "albert."."""
    tensors = encoder_tensors_to_hf(dict(weights, layers=[], embedding_projection_kernel=None))
    # ALBERT's pooler is a bare Linear named "pooler".
    tensors["pooler.weight"] = tensors.pop("pooler.dense.weight")
    tensors["pooler.bias"] = tensors.pop("pooler.dense.bias")
    tensors["encoder.embedding_hidden_mapping_in.weight"] = \
        weights["embedding_projection_kernel"].T
    tensors["encoder.embedding_hidden_mapping_in.bias"] = weights["embedding_projection_bias"]
    for g, group in enumerate(weights["groups"]):
        for r, layer in enumerate(group):
            tensors.update(_block_tensors(ALBERT_LAYOUT, ALBERT_LAYOUT["layer"].format(g=g, r=r),
                                          layer))
    return {"albert." + name: value for name, value in tensors.items()}


def big_bird_tensors_to_hf(weights):
    """BigBird's weights are BERT's, under "bert." as the published files."""
    return encoder_tensors_to_hf(weights, prefix="bert.")


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


def roberta_tensors_to_hf(weights):
    """The canonical RoBERTa dict -> {transformers name: array} (no pooler),
    under "roberta." as the published RobertaForMaskedLM files are (and as
    keras-hub's converter reads them)."""
    positions = np.asarray(weights["position_embeddings"])
    hidden = positions.shape[1]
    # fairseq's padding_idx + 1 offset rows, never read for real tokens
    return encoder_tensors_to_hf(dict(
        weights, pooler_kernel=None,
        position_embeddings=np.concatenate([np.zeros((2, hidden), positions.dtype), positions]),
        type_embeddings=np.zeros((1, hidden), positions.dtype)), prefix="roberta.")



def roberta_config_to_hf(backbone):
    config = bert_config_to_hf(backbone)
    config.update(architectures=["RobertaModel"], model_type="roberta",
                  max_position_embeddings=backbone.max_sequence_length + 2, type_vocab_size=1,
                  pad_token_id=1, bos_token_id=0, eos_token_id=2)
    return config


def distilbert_config_to_hf(backbone):
    # transformers' DistilBERT has no config key for the LayerNorm epsilon: its
    # modules fix 1e-12, so a backbone with another would read back changed.
    if not math.isclose(backbone.layer_norm_epsilon, 1e-12, rel_tol=1e-9):
        raise UsageError(f"transformers' DistilBertModel fixes layer_norm_epsilon=1e-12; this "
                         f"backbone uses {backbone.layer_norm_epsilon:g}, so its outputs would "
                         "change there.")
    return {
        "architectures": ["DistilBertModel"], "model_type": "distilbert",
        "vocab_size": backbone.vocabulary_size, "dim": backbone.hidden_dim,
        "n_layers": backbone.num_layers, "n_heads": backbone.num_heads,
        "hidden_dim": backbone.intermediate_dim,
        "max_position_embeddings": backbone.max_sequence_length,
        "dropout": backbone.dropout, "attention_dropout": backbone.dropout,
        "activation": "gelu", "sinusoidal_pos_embds": False,
        "initializer_range": backbone.initializer_range, "pad_token_id": 0,
    }


def electra_config_to_hf(backbone):
    config = bert_config_to_hf(backbone)
    config.update(architectures=["ElectraModel"], model_type="electra",
                  embedding_size=backbone.embedding_dim or backbone.hidden_dim)
    return config


def albert_config_to_hf(backbone):
    config = bert_config_to_hf(backbone)
    config.update(architectures=["AlbertModel"], model_type="albert",
                  embedding_size=backbone.embedding_dim, num_hidden_groups=backbone.num_groups,
                  inner_group_num=backbone.num_inner_repetitions)
    return config


def big_bird_config_to_hf(backbone):
    config = bert_config_to_hf(backbone)
    config.update(architectures=["BigBirdModel"], model_type="big_bird",
                  attention_type="block_sparse" if backbone.attention == "bigbird"
                  else "original_full",
                  block_size=backbone.block_size, num_random_blocks=backbone.num_random_blocks,
                  use_bias=True, rescale_embeddings=False)
    return config


def gpt_tensors_to_hf(weights):
    """The canonical GPT dict -> `OpenAIGPTModel` names (`gpt_weights_from_hf`
    inverted: Conv1D weights stay [in, out]; q | k | v join in c_attn)."""
    tensors = {"tokens_embed.weight": weights["word_embeddings"],
               "positions_embed.weight": weights["position_embeddings"]}
    for i, layer in enumerate(weights["layers"]):
        base = f"h.{i}."
        tensors[base + "attn.c_attn.weight"] = np.concatenate(
            [layer[f"{part}_kernel"] for part in ("query", "key", "value")], axis=1)
        tensors[base + "attn.c_attn.bias"] = np.concatenate(
            [layer[f"{part}_bias"] for part in ("query", "key", "value")])
        for key, module in GPT_BLOCK.items():
            if key.endswith("_ln"):
                tensors[base + module + ".weight"] = layer[f"{key}_gamma"]
                tensors[base + module + ".bias"] = layer[f"{key}_beta"]
            else:
                tensors[base + module + ".weight"] = layer[f"{key}_kernel"]
                tensors[base + module + ".bias"] = layer[f"{key}_bias"]
    return tensors


def gpt_config_to_hf(backbone):
    if backbone.intermediate_dim != 4 * backbone.hidden_dim:
        raise UsageError(f"openai-gpt's feed-forward is 4 x n_embd wide; this GptBackbone's is "
                         f"{backbone.intermediate_dim} for n_embd {backbone.hidden_dim}.")
    afn = {ours: theirs for theirs, ours in reversed(list(GPT_ACTIVATIONS.items()))}
    if backbone.activation not in afn:
        raise UsageError(f"openai-gpt has no {backbone.activation!r} activation.")
    return {"architectures": ["OpenAIGPTModel"], "model_type": "openai-gpt",
            "vocab_size": backbone.vocabulary_size, "n_positions": backbone.max_sequence_length,
            "n_embd": backbone.hidden_dim, "n_layer": backbone.num_layers,
            "n_head": backbone.num_heads, "afn": afn[backbone.activation],
            "resid_pdrop": backbone.dropout, "embd_pdrop": backbone.dropout,
            "attn_pdrop": backbone.dropout, "layer_norm_epsilon": backbone.layer_norm_epsilon,
            "initializer_range": backbone.initializer_range}


#: our class -> (canonical dict -> tensors, backbone -> config.json, tokenizer kind)
WRITERS = {
    BertBackbone: (bert_tensors_to_hf, bert_config_to_hf, "wordpiece"),
    RobertaBackbone: (roberta_tensors_to_hf, roberta_config_to_hf, "bpe"),
    DistilBertBackbone: (distilbert_tensors_to_hf, distilbert_config_to_hf, "wordpiece"),
    ElectraBackbone: (electra_tensors_to_hf, electra_config_to_hf, "wordpiece"),
    AlbertBackbone: (albert_tensors_to_hf, albert_config_to_hf, "sentencepiece"),
    BigBirdBackbone: (big_bird_tensors_to_hf, big_bird_config_to_hf, "sentencepiece"),
    GptBackbone: (gpt_tensors_to_hf, gpt_config_to_hf, "gpt1_bpe"),
    # Written from the backbone itself (`WEIGHT_READERS`), with the
    # tokenizer.json it was loaded from.
    ModernBertBackbone: (modernbert_tensors_to_hf, modernbert_config_to_hf, "bert_bpe"),
}
#: What a writer's tensor function takes, per class: the canonical dict
#: (`get_bert_weights`, ALBERT's groups) or the backbone.
WEIGHT_READERS = {AlbertBackbone: get_albert_weights, ModernBertBackbone: lambda b: b}
#: the tokenizer files' names in a Hugging Face model directory
HF_TOKENIZER_NAMES = {"wordpiece": ("vocab.txt",), "bpe": ("vocab.json", "merges.txt"),
                      "gpt1_bpe": ("vocab.json", "merges.txt"),
                      "sentencepiece": ("spiece.model",), "bert_bpe": ("tokenizer.json",)}


def write_hf_directory(backbone, directory, tokenizer_files=(), lower_case=True,
                       added_tokens=None):
    """Writes `backbone` and its tokenizer's files (vocab.txt; vocab.json +
    merges.txt) into `directory`, which exists and is empty (the caller
    makes it atomic). `added_tokens`: {token: id} a tokenizer appended to
    its files' vocabulary (GPT-1's specials), written to added_tokens.json.

    Raises:
        UsageError: a family this writer does not have, or a factorised
            embedding.
    """
    if not hf_holds(backbone):
        raise UsageError(f"--to hf writes {', '.join(c.__name__ for c in WRITERS)} (without a "
                         f"factorised embedding) today; got a {type(backbone).__name__}.")
    writer = WRITERS[type(backbone)]
    to_tensors, to_config, _ = writer
    read = WEIGHT_READERS.get(type(backbone), get_bert_weights)
    write_safetensors(os.path.join(directory, SINGLE_FILE), to_tensors(read(backbone)))
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump(to_config(backbone), f, indent=2)
    if isinstance(tokenizer_files, str):
        tokenizer_files = (tokenizer_files,)
    # The names transformers looks for.
    for path, name in zip(tokenizer_files, HF_TOKENIZER_NAMES[writer[2]]):
        shutil.copyfile(path, os.path.join(directory, name))
    if added_tokens:
        with open(os.path.join(directory, "added_tokens.json"), "w", encoding="utf-8") as f:
            json.dump(added_tokens, f, indent=2)
    if writer[2] not in ("bpe", "gpt1_bpe", "bert_bpe") and tokenizer_files:
        with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump({"do_lower_case": bool(lower_case)}, f)


def hf_holds(backbone):
    """Whether `write_hf_directory` writes this backbone (its family, and a
    factorised embedding only where the family has one)."""
    factorised = getattr(backbone, "embedding_dim", None) not in (None, backbone.hidden_dim)
    return type(backbone) in WRITERS and (
        not factorised or type(backbone) in (ElectraBackbone, AlbertBackbone))


def tokenizer_kind_for(backbone):
    """The tokenizer family `--to hf` carries for this backbone, or None."""
    writer = WRITERS.get(type(backbone))
    return writer[2] if writer else None
