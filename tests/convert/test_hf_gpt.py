"""GPT-1 (`openai-gpt`) from Hugging Face directories: the names and shapes
of the published checkpoint (a committed fixture) all map onto the `gpt1`
preset, and a tiny checkpoint in those names gives what a NumPy GPT-1
(post-LayerNorm blocks, tanh GELU, causal attention, no embedding
LayerNorm) computes."""

import json
import math
import os

import numpy as np
import pytest
from test_hf_checkpoint import write_hf

from kerasbert.convert import from_hf_directory
from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.hf_layout import Tensors
from kerasbert.convert.hf_layout import gpt_config_from_hf
from kerasbert.convert.hf_layout import gpt_weights_from_hf
from kerasbert.models import GptBackbone
from kerasbert.models import get_preset

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "openai_gpt.json")


class _Recording(dict):
    """Tensors that remember which names were read."""

    def __init__(self, *args):
        super().__init__(*args)
        self.read = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)


def _shapes(tree):
    if isinstance(tree, dict):
        return {k: _shapes(v) for k, v in tree.items() if v is not None}
    if isinstance(tree, list):
        return [_shapes(v) for v in tree]
    return tuple(np.shape(tree))


def test_the_published_names_and_shapes_map_onto_the_gpt1_preset():
    fixture = json.load(open(FIXTURE))
    # Zero-cost stand-ins of the real shapes (no 470 MB allocated).
    tensors = _Recording({n: np.broadcast_to(np.float32(0), s)
                          for n, s in fixture["tensors"].items()})
    kwargs = gpt_config_from_hf(fixture["config"], FIXTURE)
    preset = get_preset("gpt1")["config"]
    assert {k: kwargs[k] for k in preset if k in kwargs} == {
        k: v for k, v in preset.items() if k in kwargs}
    weights = gpt_weights_from_hf(Tensors(tensors, FIXTURE))
    assert tensors.read == set(fixture["tensors"])  # every published tensor is used
    ours = GptBackbone(**kwargs)
    assert _shapes(weights) == _shapes(get_bert_weights(ours))


def _layer_norm(x, gamma, beta, eps=1e-5):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _reference(t, ids, heads):
    """GPT-1's forward pass in NumPy, from the transformers tensor names."""
    x = t["tokens_embed.weight"][ids] + t["positions_embed.weight"][: ids.shape[1]]
    length = ids.shape[1]
    causal = np.triu(np.full((length, length), -np.inf), 1)
    i = 0
    while f"h.{i}.attn.c_attn.weight" in t:
        b = f"h.{i}."
        q, k, v = np.split(x @ t[b + "attn.c_attn.weight"] + t[b + "attn.c_attn.bias"], 3, -1)
        split = lambda a: a.reshape(a.shape[0], length, heads, -1).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = split(q), split(k), split(v)
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(q.shape[-1]) + causal
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        attended = (probs @ v).transpose(0, 2, 1, 3).reshape(x.shape)
        a = attended @ t[b + "attn.c_proj.weight"] + t[b + "attn.c_proj.bias"]
        x = _layer_norm(x + a, t[b + "ln_1.weight"], t[b + "ln_1.bias"])
        m = _gelu_tanh(x @ t[b + "mlp.c_fc.weight"] + t[b + "mlp.c_fc.bias"])
        m = m @ t[b + "mlp.c_proj.weight"] + t[b + "mlp.c_proj.bias"]
        x = _layer_norm(x + m, t[b + "ln_2.weight"], t[b + "ln_2.bias"])
        i += 1
    return x


def gpt_tensors(rng, V, H, P, L, embedding_std=0.3):
    """Random weights under openai-gpt's names (float32)."""
    t = {"tokens_embed.weight": rng.normal(0, embedding_std, (V, H)),
         "positions_embed.weight": rng.normal(0, 0.3, (P, H))}
    for i in range(L):
        b = f"h.{i}."
        for name, shape in {"attn.c_attn": (H, 3 * H), "attn.c_proj": (H, H),
                            "mlp.c_fc": (H, 4 * H), "mlp.c_proj": (4 * H, H)}.items():
            t[f"{b}{name}.weight"] = rng.normal(0, 0.3, shape)
            t[f"{b}{name}.bias"] = rng.normal(0, 0.1, shape[1])
        for name in ("ln_1", "ln_2"):
            t[f"{b}{name}.weight"] = 1 + rng.normal(0, 0.1, H)
            t[f"{b}{name}.bias"] = rng.normal(0, 0.1, H)
    return {k: v.astype("float32") for k, v in t.items()}


@pytest.mark.parametrize("prefix", ["", "transformer."])
def test_a_tiny_checkpoint_computes_what_gpt1_computes(tmp_path, prefix):
    rng = np.random.default_rng(0)
    V, H, P, L, HEADS = 40, 16, 12, 2, 2
    t = gpt_tensors(rng, V, H, P, L)
    config = {"model_type": "openai-gpt", "vocab_size": V, "n_positions": P, "n_embd": H,
              "n_layer": L, "n_head": HEADS, "afn": "gelu", "resid_pdrop": 0.1,
              "embd_pdrop": 0.1, "attn_pdrop": 0.1}
    path = write_hf(tmp_path / "gpt", {prefix + k: v for k, v in t.items()}, config)
    ours = from_hf_directory(path)
    assert isinstance(ours, GptBackbone) and ours.activation == "gelu_approximate"
    ids = rng.integers(0, V, (2, 7)).astype("int32")
    got = ours({"input_word_ids": ids, "input_mask": np.ones_like(ids),
                "input_type_ids": np.zeros_like(ids)})["sequence_output"]
    np.testing.assert_allclose(np.asarray(got), _reference(t, ids, HEADS), atol=2e-5)
