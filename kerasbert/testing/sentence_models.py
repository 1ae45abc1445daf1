"""Tiny sentence-transformers folders and a NumPy reference of their pooling.

`write_sentence_model(directory, ...)` writes what the `sentence-transformers`
library saves for a BERT model: a Hugging Face folder (config.json,
model.safetensors written with the `safetensors` library under
`transformers`' tensor names, vocab.txt, tokenizer_config.json) plus
modules.json, 1_Pooling/config.json and sentence_bert_config.json.
`reference_pooling` pools token vectors as sentence-transformers' `Pooling`
and `Normalize` modules do, in float64 NumPy.
"""

import json
import os

import numpy as np

from kerasbert.testing.files import write_vocabulary

# 1_Pooling/config.json keys of our pooling mode names.
POOLING_KEYS = {"cls": "pooling_mode_cls_token", "max": "pooling_mode_max_tokens",
                "mean": "pooling_mode_mean_tokens",
                "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens"}
MODULE = "sentence_transformers.models."

WORDS = ("[PAD] [UNK] [CLS] [SEP] [MASK] the a cat dog sat sits on mat rug hello world "
         "is was and of to in quick brown fox jumps over lazy . , ! ? ##s ##ed ##ing").split()


def write_sentence_files(directory, pooling=("mean",), normalize=True, max_seq_length=16,
                         do_lower_case=False, embedding_dim=16, extra_modules=()):
    """modules.json, 1_Pooling/config.json and sentence_bert_config.json.

    Args:
        pooling: mode names (`POOLING_KEYS`) switched on.
        normalize: list a Normalize module (2_Normalize, no files).
        max_seq_length: None leaves the key out.
        extra_modules: further module type names appended to modules.json.
    """
    modules = [{"idx": 0, "name": "0", "path": "", "type": MODULE + "Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": MODULE + "Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": MODULE + "Normalize"})
    for kind in extra_modules:
        modules.append({"idx": len(modules), "name": str(len(modules)), "path": "",
                        "type": kind})
    os.makedirs(os.path.join(directory, "1_Pooling"), exist_ok=True)
    pooling_config = {"word_embedding_dimension": embedding_dim,
                      **{key: mode in pooling for mode, key in POOLING_KEYS.items()},
                      "pooling_mode_weightedmean_tokens": False,
                      "pooling_mode_lasttoken": False, "include_prompt": True}
    sentence_config = {"do_lower_case": do_lower_case}
    if max_seq_length is not None:
        sentence_config["max_seq_length"] = max_seq_length
    for name, value in (("modules.json", modules),
                        (os.path.join("1_Pooling", "config.json"), pooling_config),
                        ("sentence_bert_config.json", sentence_config)):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2)
    return str(directory)


def bert_tensors(vocabulary_size, hidden=16, layers=2, intermediate=32, positions=24, seed=0):
    """Random float32 weights of a BERT encoder under `transformers`' names."""
    rng = np.random.default_rng(seed)

    def rand(*shape, mean=0.0):
        return (mean + rng.normal(0.0, 0.2, shape)).astype(np.float32)

    tensors = {"embeddings.word_embeddings.weight": rand(vocabulary_size, hidden),
               "embeddings.position_embeddings.weight": rand(positions, hidden),
               "embeddings.token_type_embeddings.weight": rand(2, hidden),
               "embeddings.LayerNorm.weight": rand(hidden, mean=1.0),
               "embeddings.LayerNorm.bias": rand(hidden),
               "pooler.dense.weight": rand(hidden, hidden), "pooler.dense.bias": rand(hidden)}
    shapes = {"attention.self.query": (hidden, hidden), "attention.self.key": (hidden, hidden),
              "attention.self.value": (hidden, hidden),
              "attention.output.dense": (hidden, hidden),
              "intermediate.dense": (intermediate, hidden), "output.dense": (hidden, intermediate)}
    for i in range(layers):
        base = f"encoder.layer.{i}."
        for name, (rows, cols) in shapes.items():
            tensors[f"{base}{name}.weight"] = rand(rows, cols)
            tensors[f"{base}{name}.bias"] = rand(rows)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            tensors[f"{base}{name}.weight"] = rand(hidden, mean=1.0)
            tensors[f"{base}{name}.bias"] = rand(hidden)
    return tensors


def write_sentence_model(directory, pooling=("mean",), normalize=True, max_seq_length=16,
                         do_lower_case=False, hidden=16, layers=2, heads=2, positions=24,
                         seed=0, sentence_files=True):
    """A tiny sentence-transformers BERT folder; returns (directory,
    {transformers name: float32 array}, config.json's dict). Without
    `sentence_files`, a plain Hugging Face BERT folder (as `transformers`
    saves one, with vocab.txt and tokenizer_config.json)."""
    from safetensors.numpy import save_file

    os.makedirs(directory, exist_ok=True)
    write_vocabulary(directory, WORDS)
    tensors = bert_tensors(len(WORDS), hidden=hidden, layers=layers, intermediate=2 * hidden,
                           positions=positions, seed=seed)
    save_file(tensors, os.path.join(directory, "model.safetensors"))
    config = {"model_type": "bert", "architectures": ["BertModel"], "vocab_size": len(WORDS),
              "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
              "intermediate_size": 2 * hidden, "hidden_act": "gelu",
              "max_position_embeddings": positions, "type_vocab_size": 2,
              "layer_norm_eps": 1e-12, "hidden_dropout_prob": 0.1,
              "attention_probs_dropout_prob": 0.1, "pad_token_id": 0}
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2)
    with open(os.path.join(directory, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"do_lower_case": True, "tokenizer_class": "BertTokenizer",
                   "model_max_length": positions}, f)
    if sentence_files:
        write_sentence_files(directory, pooling, normalize, max_seq_length, do_lower_case, hidden)
    return str(directory), tensors, config


def reference_pooling(sequence_output, input_mask, pooling=("mean",), normalize=False):
    """Sentence-transformers' pooling in float64 NumPy.

    Args:
        sequence_output: [B, T, H] token vectors.
        input_mask: [B, T], 1 on real tokens.
        pooling: modes, concatenated in sentence-transformers' order (cls,
            max, mean, mean_sqrt_len).
        normalize: divide by max(L2 norm, 1e-12) (its Normalize module).

    Returns:
        float64 [B, H * len(pooling)].
    """
    x = np.asarray(sequence_output, np.float64)
    mask = np.asarray(input_mask, np.float64)[:, :, None]
    count = np.maximum(mask.sum(axis=1), 1e-9)
    parts = []
    for mode in ("cls", "max", "mean", "mean_sqrt_len"):
        if mode not in pooling:
            continue
        if mode == "cls":
            parts.append(x[:, 0])
        elif mode == "max":
            parts.append(np.where(mask > 0, x, -1e9).max(axis=1))
        elif mode == "mean":
            parts.append((x * mask).sum(axis=1) / count)
        else:
            parts.append((x * mask).sum(axis=1) / np.sqrt(count))
    pooled = np.concatenate(parts, axis=-1)
    if normalize:
        pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)
    return pooled
