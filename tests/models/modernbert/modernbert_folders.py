"""Tiny ModernBERT folders the tests write themselves: one by transformers
(`ModernBertForMaskedLM.save_pretrained`), one in the published layout by
safetensors alone (every name and shape as the published config gives
them), and a batch of ids with padding."""

import json
import os

import numpy as np

#: hidden 32, 4 heads, 4 layers (global at 0 and 3), window 64: lengths 64,
#: 128 and 300 cross it.
SIZES = dict(vocab_size=99, hidden_size=32, intermediate_size=24, num_hidden_layers=4,
             num_attention_heads=4, local_attention=64, global_attn_every_n_layers=3)
LENGTHS = (64, 128, 300)


def transformers_folder(path, seed=0):
    """(path, the torch model) of a random ModernBertForMaskedLM saved by
    transformers (safetensors), its LayerNorm scales and decoder bias
    perturbed so none is 1 or 0."""
    import torch
    from transformers import ModernBertConfig, ModernBertForMaskedLM

    torch.manual_seed(seed)
    config = ModernBertConfig(**SIZES, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                              cls_token_id=1, sep_token_id=2, attn_implementation="eager")
    model = ModernBertForMaskedLM(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name or "bias" in name:
                parameter.add_(torch.randn_like(parameter) * 0.1)
    model.save_pretrained(str(path))
    return path, model


#: The published config.json (answerdotai/ModernBERT-base, Dec 2024) at
#: tiny sizes.
def published_config(**changes):
    config = {
        "architectures": ["ModernBertForMaskedLM"], "model_type": "modernbert",
        "vocab_size": 99, "hidden_size": 32, "intermediate_size": 24, "num_hidden_layers": 4,
        "num_attention_heads": 4, "hidden_activation": "gelu", "max_position_embeddings": 8192,
        "norm_eps": 1e-5, "layer_norm_eps": 1e-5, "norm_bias": False,
        "global_rope_theta": 160000.0, "local_rope_theta": 10000.0,
        "global_attn_every_n_layers": 3, "local_attention": 64, "attention_bias": False,
        "attention_dropout": 0.0, "embedding_dropout": 0.0, "mlp_bias": False,
        "mlp_dropout": 0.0, "decoder_bias": True, "classifier_bias": False,
        "classifier_activation": "gelu", "position_embedding_type": "absolute",
        "tie_word_embeddings": True, "pad_token_id": 0, "cls_token_id": 1, "sep_token_id": 2,
    }
    config.update(changes)
    return config


def published_tensors(config, seed=0):
    """{published name: float32 array} of a ModernBertForMaskedLM of
    `config` (the encoder under "model.", the head, decoder.bias)."""
    rng = np.random.default_rng(seed)
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    normal = lambda *shape: rng.normal(0, 0.2, shape).astype("float32")
    scale = lambda: (1 + rng.normal(0, 0.1, h)).astype("float32")
    tensors = {"model.embeddings.tok_embeddings.weight": normal(v, h),
               "model.embeddings.norm.weight": scale(), "model.final_norm.weight": scale(),
               "head.dense.weight": normal(h, h), "head.norm.weight": scale(),
               "decoder.bias": normal(v)}
    for layer in range(config["num_hidden_layers"]):
        base = f"model.layers.{layer}."
        if layer:
            tensors[base + "attn_norm.weight"] = scale()
        tensors.update({base + "attn.Wqkv.weight": normal(3 * h, h),
                        base + "attn.Wo.weight": normal(h, h),
                        base + "mlp_norm.weight": scale(),
                        base + "mlp.Wi.weight": normal(2 * i, h),
                        base + "mlp.Wo.weight": normal(h, i)})
    return tensors


def published_folder(path, config=None, tensors=None):
    """Writes config.json and model.safetensors (the safetensors library's
    writer) into `path`; returns (path, config, tensors)."""
    from safetensors.numpy import save_file

    config = config or published_config()
    tensors = published_tensors(config) if tensors is None else tensors
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    save_file(tensors, os.path.join(path, "model.safetensors"))
    return path, config, tensors


def padded_batch(length, seed=0, vocabulary=99):
    """(ids, mask) int32 [3, length]: a full row, one half padded, one with
    seven pad positions."""
    rng = np.random.default_rng(seed + length)
    ids = rng.integers(3, vocabulary, (3, length)).astype("int32")
    mask = np.ones((3, length), "int32")
    mask[1, length // 2:] = 0
    mask[2, length - 7:] = 0
    return ids, mask


def sequence_output(backbone, ids, mask):
    outputs = backbone({"input_word_ids": ids, "input_mask": mask,
                        "input_type_ids": np.zeros_like(ids)})
    return np.asarray(outputs["sequence_output"])


def write_tokenizer(folder, lines, vocab_size=700):
    """Writes a ModernBERT-style tokenizer.json into `folder` with the
    `tokenizers` library and returns the library's Tokenizer: a byte-level
    BPE learned from `lines`, NFC normalizer, GPT-2's ByteLevel
    pre-tokenizer without a prefix space, ByteLevel decoder, OLMo's added
    tokens (|||IP_ADDRESS|||, <|padding|>, runs of 2-24 spaces and
    |||EMAIL_ADDRESS||| as normalized non-special tokens), then
    <|endoftext|> [UNK] [CLS] [SEP] [PAD] [MASK] (lstrip) as specials, and
    the TemplateProcessing "[CLS] $A [SEP]" / "[CLS] $A [SEP] $B [SEP]"."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers
    from tokenizers import pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                       trim_offsets=True, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["|||IP_ADDRESS|||", "<|padding|>"])
    tokenizer.train_from_iterator(lines, trainer)
    tokenizer.add_tokens([AddedToken(" " * n, normalized=True) for n in range(24, 1, -1)]
                         + [AddedToken("|||EMAIL_ADDRESS|||", normalized=True)])
    tokenizer.add_special_tokens(
        [AddedToken(t, normalized=False) for t in ("<|endoftext|>", "[UNK]", "[CLS]", "[SEP]",
                                                   "[PAD]")]
        + [AddedToken("[MASK]", lstrip=True, normalized=False)])
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    os.makedirs(folder, exist_ok=True)
    tokenizer.save(os.path.join(folder, "tokenizer.json"))
    return tokenizer
