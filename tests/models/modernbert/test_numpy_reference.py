"""An independent NumPy ModernBERT forward pass over a folder written in
the published layout (safetensors alone, every name and shape as the
published config gives them) equals `Backbone.from_preset(DIR)` at lengths
64, 128 and 300 with padding, in both config.json forms."""

import numpy as np
import pytest
from scipy.special import erf

from kerasbert.models import Backbone
from modernbert_folders import LENGTHS
from modernbert_folders import padded_batch
from modernbert_folders import published_config
from modernbert_folders import published_folder
from modernbert_folders import sequence_output


def layer_norm(x, gamma, eps=1e-5):  # no bias
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * gamma


def rotate(x, theta):
    """x [B, heads, T, d] rotated by position (halves paired, as HF's rotate_half)."""
    d = x.shape[-1]
    inverse = 1.0 / theta ** (np.arange(0, d, 2) / d)
    angles = np.arange(x.shape[2])[:, None] * inverse[None]
    cos, sin = np.cos(np.concatenate([angles] * 2, -1)), np.sin(np.concatenate([angles] * 2, -1))
    half = np.concatenate([-x[..., d // 2:], x[..., : d // 2]], -1)
    return x * cos + half * sin


def forward(t, config, ids, mask):
    """[B, T, H] of the published tensors `t` (float64 throughout)."""
    t = {k.removeprefix("model."): v.astype("float64") for k, v in t.items()}
    heads, eps = config["num_attention_heads"], config["norm_eps"]
    x = layer_norm(t["embeddings.tok_embeddings.weight"][ids], t["embeddings.norm.weight"], eps)
    b, length, hidden = x.shape
    distance = np.abs(np.arange(length)[:, None] - np.arange(length)[None])
    for i in range(config["num_hidden_layers"]):
        p = f"layers.{i}."
        is_global = i % config["global_attn_every_n_layers"] == 0
        normed = x if i == 0 else layer_norm(x, t[p + "attn_norm.weight"], eps)
        qkv = (normed @ t[p + "attn.Wqkv.weight"].T).reshape(b, length, 3, heads, -1)
        q, k, v = (qkv[:, :, j].transpose(0, 2, 1, 3) for j in range(3))
        theta = config["global_rope_theta"] if is_global else config["local_rope_theta"]
        q, k = rotate(q, theta), rotate(k, theta)
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
        allowed = mask[:, None, None, :].astype(bool)
        if not is_global:
            allowed = allowed & (distance <= config["local_attention"] // 2)[None, None]
        scores = np.where(allowed, scores, -1e30)  # padded rows stay finite
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        attended = (weights @ v).transpose(0, 2, 1, 3).reshape(b, length, hidden)
        x = x + attended @ t[p + "attn.Wo.weight"].T
        gate, value = np.split(layer_norm(x, t[p + "mlp_norm.weight"], eps)
                               @ t[p + "mlp.Wi.weight"].T, 2, axis=-1)
        gelu = 0.5 * gate * (1 + erf(gate / np.sqrt(2)))
        x = x + (gelu * value) @ t[p + "mlp.Wo.weight"].T
    return layer_norm(x, t["final_norm.weight"], eps)


TRANSFORMERS_5 = dict(layer_types=["full_attention", "sliding_attention", "sliding_attention",
                                   "full_attention"],
                      rope_parameters={"full_attention": {"rope_type": "default",
                                                          "rope_theta": 160000.0},
                                       "sliding_attention": {"rope_type": "default",
                                                             "rope_theta": 10000.0}})


@pytest.mark.parametrize("form", ["published_2024", "transformers_5"])
def test_backbone_equals_numpy(tmp_path, form):
    config = published_config()
    if form == "transformers_5":
        for key in ("global_rope_theta", "local_rope_theta", "global_attn_every_n_layers",
                    "local_attention"):
            config.pop(key)
        config.update(TRANSFORMERS_5, sliding_window=32)
    path, _, tensors = published_folder(tmp_path / form, config)
    backbone = Backbone.from_preset(str(path))
    config = published_config()  # the values both forms state
    for length in LENGTHS:
        ids, mask = padded_batch(length)
        expected = forward(tensors, config, ids, mask)
        got = sequence_output(backbone, ids, mask)
        difference = np.abs((got - expected) * mask[..., None]).max()
        print(f"{form} length {length}: max |ours - numpy| = {difference:.2e}")
        assert difference < 1e-5
