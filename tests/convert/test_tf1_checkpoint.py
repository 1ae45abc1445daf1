"""Original google-research/bert TF1 checkpoints: load, save, round trip.

The checkpoint is written here the way the original code wrote it (tf.compat.v1
variables in a graph, `tf.compat.v1.train.Saver`), and the reference outputs
come from a NumPy re-implementation of the original forward pass, so neither
side of the comparison uses kerasbert code.
"""

import json
import math
import os
import sys

import numpy as np
import pytest
import tensorflow as tf

from kerasbert.convert import bert_config_to_kwargs
from kerasbert.convert import kwargs_to_bert_config
from kerasbert.convert import load_bert_checkpoint
from kerasbert.convert import load_pretraining_heads
from kerasbert.convert import save_bert_checkpoint
from kerasbert.convert import tf1_checkpoint

sys.path.insert(0, os.path.dirname(__file__))
from peer_fixtures import assert_close_on_real_tokens  # noqa: E402

VOCAB, LAYERS, HIDDEN, HEADS, INNER, SEQ, POSITIONS = 60, 2, 16, 2, 32, 12, 24

BERT_CONFIG = {
    "attention_probs_dropout_prob": 0.1,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": HIDDEN,
    "initializer_range": 0.02,
    "intermediate_size": INNER,
    "max_position_embeddings": POSITIONS,
    "num_attention_heads": HEADS,
    "num_hidden_layers": LAYERS,
    "type_vocab_size": 2,
    "vocab_size": VOCAB,
}


# ---------------------------------------------------------------- fixtures


def _original_shapes(config, heads=True):
    """The original variable names and shapes, spelled out independently."""
    h, i_dim = config["hidden_size"], config["intermediate_size"]
    e = config.get("embedding_size", h)
    shapes = {
        "bert/embeddings/word_embeddings": (config["vocab_size"], e),
        "bert/embeddings/position_embeddings": (config["max_position_embeddings"], e),
        "bert/embeddings/token_type_embeddings": (config["type_vocab_size"], e),
        "bert/embeddings/LayerNorm/gamma": (e,),
        "bert/embeddings/LayerNorm/beta": (e,),
        "bert/pooler/dense/kernel": (h, h),
        "bert/pooler/dense/bias": (h,),
    }
    if e != h:
        shapes["bert/encoder/embedding_hidden_mapping_in/kernel"] = (e, h)
        shapes["bert/encoder/embedding_hidden_mapping_in/bias"] = (h,)
    for i in range(config["num_hidden_layers"]):
        p = f"bert/encoder/layer_{i}/"
        for name in ("query", "key", "value"):
            shapes[p + f"attention/self/{name}/kernel"] = (h, h)
            shapes[p + f"attention/self/{name}/bias"] = (h,)
        shapes[p + "attention/output/dense/kernel"] = (h, h)
        shapes[p + "attention/output/dense/bias"] = (h,)
        shapes[p + "attention/output/LayerNorm/gamma"] = (h,)
        shapes[p + "attention/output/LayerNorm/beta"] = (h,)
        shapes[p + "intermediate/dense/kernel"] = (h, i_dim)
        shapes[p + "intermediate/dense/bias"] = (i_dim,)
        shapes[p + "output/dense/kernel"] = (i_dim, h)
        shapes[p + "output/dense/bias"] = (h,)
        shapes[p + "output/LayerNorm/gamma"] = (h,)
        shapes[p + "output/LayerNorm/beta"] = (h,)
    if heads:
        shapes.update(
            {
                "cls/predictions/transform/dense/kernel": (h, e),
                "cls/predictions/transform/dense/bias": (e,),
                "cls/predictions/transform/LayerNorm/gamma": (e,),
                "cls/predictions/transform/LayerNorm/beta": (e,),
                "cls/predictions/output_bias": (config["vocab_size"],),
                "cls/seq_relationship/output_weights": (2, h),
                "cls/seq_relationship/output_bias": (2,),
            }
        )
    return shapes


def _random_tensors(shapes, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape in shapes.items():
        base = 1.0 if name.endswith("gamma") else 0.0
        out[name] = (base + 0.2 * rng.standard_normal(shape)).astype("float32")
    return out


def write_tf1_checkpoint(prefix, tensors):
    """Saves `tensors` as graph-mode variables with a TF1 Saver."""
    graph = tf.Graph()
    with graph.as_default():
        variables = [
            tf.compat.v1.get_variable(name, initializer=tf.constant(value))
            for name, value in tensors.items()
        ]
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            return saver.save(sess, str(prefix), write_meta_graph=False)


def write_config(path, config):
    path.write_text(json.dumps(config))
    return str(path)


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    """(prefix, config path, tensors) of a random original checkpoint."""
    d = tmp_path_factory.mktemp("original")
    tensors = _random_tensors(_original_shapes(BERT_CONFIG), seed=0)
    prefix = write_tf1_checkpoint(d / "bert_model.ckpt", tensors)
    return prefix, write_config(d / "bert_config.json", BERT_CONFIG), tensors


# ------------------------------------------------------- NumPy reference


_erf = np.vectorize(math.erf)


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def reference_bert(t, config, ids, mask, types):
    """The original modeling.py forward pass (inference), float64.

    Returns sequence_output [B, T, H] and pooled_output [B, H].
    """
    t = {k: v.astype("float64") for k, v in t.items()}
    b, length = ids.shape
    heads = config["num_attention_heads"]
    head_dim = config["hidden_size"] // heads
    x = (
        t["bert/embeddings/word_embeddings"][ids]
        + t["bert/embeddings/position_embeddings"][:length][None]
        + t["bert/embeddings/token_type_embeddings"][types]
    )
    x = _layer_norm(
        x, t["bert/embeddings/LayerNorm/gamma"], t["bert/embeddings/LayerNorm/beta"]
    )
    if "bert/encoder/embedding_hidden_mapping_in/kernel" in t:
        x = (
            x @ t["bert/encoder/embedding_hidden_mapping_in/kernel"]
            + t["bert/encoder/embedding_hidden_mapping_in/bias"]
        )
    # Original: adder = (1 - mask) * -10000, broadcast over heads and queries.
    adder = (1.0 - mask[:, None, None, :].astype("float64")) * -10000.0

    def split(y):  # [B, T, H] -> [B, N, T, D]
        return y.reshape(b, length, heads, head_dim).transpose(0, 2, 1, 3)

    for i in range(config["num_hidden_layers"]):
        p = f"bert/encoder/layer_{i}/"

        def dense(y, name):
            return y @ t[p + name + "/kernel"] + t[p + name + "/bias"]

        q = split(dense(x, "attention/self/query"))
        k = split(dense(x, "attention/self/key"))
        v = split(dense(x, "attention/self/value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head_dim) + adder
        context = (_softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(b, length, -1)
        attended = dense(context, "attention/output/dense")
        x = _layer_norm(
            attended + x,
            t[p + "attention/output/LayerNorm/gamma"],
            t[p + "attention/output/LayerNorm/beta"],
        )
        inner = _gelu(dense(x, "intermediate/dense"))
        x = _layer_norm(
            dense(inner, "output/dense") + x,
            t[p + "output/LayerNorm/gamma"],
            t[p + "output/LayerNorm/beta"],
        )
    pooler = x[:, 0] @ t["bert/pooler/dense/kernel"] + t["bert/pooler/dense/bias"]
    pooled = np.tanh(pooler)
    return x, pooled


def reference_mlm(t, sequence_output, positions):
    """cls/predictions: gather, dense+GELU, LayerNorm, tied decoder + bias."""
    t = {k: v.astype("float64") for k, v in t.items()}
    h = np.take_along_axis(sequence_output, positions[..., None], axis=1)
    h = _gelu(
        h @ t["cls/predictions/transform/dense/kernel"]
        + t["cls/predictions/transform/dense/bias"]
    )
    h = _layer_norm(
        h,
        t["cls/predictions/transform/LayerNorm/gamma"],
        t["cls/predictions/transform/LayerNorm/beta"],
    )
    return h @ t["bert/embeddings/word_embeddings"].T + t["cls/predictions/output_bias"]


def reference_nsp(t, pooled):
    w = t["cls/seq_relationship/output_weights"].astype("float64")  # [2, H]
    return pooled @ w.T + t["cls/seq_relationship/output_bias"]


def _inputs(seed=0, batch=3):
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, VOCAB, size=(batch, SEQ)).astype("int32")
    lengths = [SEQ, 8, 4][:batch]
    mask = (np.arange(SEQ)[None, :] < np.array(lengths)[:, None]).astype("int32")
    types = (np.arange(SEQ)[None, :] >= np.array(lengths)[:, None] // 2).astype("int32")
    return dict(input_word_ids=ids * mask, input_mask=mask, input_type_ids=types * mask)


def _assert_matches_reference(backbone, tensors, config, seed=0):
    inputs = _inputs(seed)
    want_seq, want_pooled = reference_bert(
        tensors, config, inputs["input_word_ids"], inputs["input_mask"],
        inputs["input_type_ids"],
    )
    got = backbone(inputs)
    assert_close_on_real_tokens(got, want_seq, want_pooled, inputs["input_mask"])
    return inputs, got


# ------------------------------------------------------------------ tests


def test_loaded_model_matches_numpy_reference(original):
    prefix, config_path, tensors = original
    backbone = load_bert_checkpoint(prefix, config_path)
    assert backbone.activation == "gelu"
    _assert_matches_reference(backbone, tensors, BERT_CONFIG)


def test_pretraining_heads_match_numpy_reference(original):
    prefix, config_path, tensors = original
    backbone = load_bert_checkpoint(prefix, config_path)
    mlm, nsp = load_pretraining_heads(prefix, backbone)
    inputs, got = _assert_matches_reference(backbone, tensors, BERT_CONFIG, seed=1)
    positions = np.array([[1, 5, 9], [0, 2, 7], [1, 2, 3]], dtype="int32")
    seq = np.asarray(got["sequence_output"])
    np.testing.assert_allclose(
        np.asarray(mlm(seq, positions)),
        reference_mlm(tensors, seq.astype("float64"), positions),
        atol=1e-5,
        rtol=0,
    )
    pooled = np.asarray(got["pooled_output"])
    np.testing.assert_allclose(
        np.asarray(nsp(pooled)), reference_nsp(tensors, pooled), atol=1e-5, rtol=0
    )


def test_save_load_round_trip_is_exact(original, tmp_path):
    prefix, config_path, tensors = original
    backbone = load_bert_checkpoint(prefix, config_path)
    mlm, nsp = load_pretraining_heads(prefix, backbone)
    new_prefix = save_bert_checkpoint(
        backbone, tmp_path / "out" / "bert_model.ckpt", mlm, nsp
    )

    # Same variable names, shapes and values as the original file.
    old = tf.train.load_checkpoint(prefix)
    new = tf.train.load_checkpoint(new_prefix)
    old_shapes = old.get_variable_to_shape_map()
    assert new.get_variable_to_shape_map() == old_shapes
    for name in old_shapes:
        np.testing.assert_array_equal(new.get_tensor(name), old.get_tensor(name))

    # The config written beside it translates back to the same arguments.
    written = tmp_path / "out" / "bert_config.json"
    assert bert_config_to_kwargs(str(written)) == bert_config_to_kwargs(config_path)
    assert sorted(os.listdir(tmp_path / "out")) == [
        "bert_config.json",
        "bert_model.ckpt.data-00000-of-00001",
        "bert_model.ckpt.index",
    ]

    again = load_bert_checkpoint(new_prefix, str(written))
    mlm2, nsp2 = load_pretraining_heads(new_prefix, again)
    inputs = _inputs(2)
    a, b = backbone(inputs), again(inputs)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]))
    positions = np.array([[1, 2], [3, 4], [0, 1]], dtype="int32")
    np.testing.assert_array_equal(
        np.asarray(mlm(a["sequence_output"], positions)),
        np.asarray(mlm2(b["sequence_output"], positions)),
    )
    np.testing.assert_array_equal(
        np.asarray(nsp(a["pooled_output"])), np.asarray(nsp2(b["pooled_output"]))
    )


def test_saved_checkpoint_restores_with_tf1_saver(original, tmp_path):
    prefix, config_path, tensors = original
    backbone = load_bert_checkpoint(prefix, config_path)
    mlm, nsp = load_pretraining_heads(prefix, backbone)
    new_prefix = save_bert_checkpoint(backbone, tmp_path / "bert_model.ckpt", mlm, nsp)
    graph = tf.Graph()
    with graph.as_default():
        variables = {
            name: tf.compat.v1.get_variable(
                name, shape=value.shape, initializer=tf.compat.v1.zeros_initializer()
            )
            for name, value in tensors.items()
        }
        saver = tf.compat.v1.train.Saver(list(variables.values()))
        with tf.compat.v1.Session(graph=graph) as sess:
            saver.restore(sess, new_prefix)
            restored = sess.run(variables)
    for name, value in tensors.items():
        np.testing.assert_array_equal(restored[name], value)


def test_factorised_embedding_albert_style(tmp_path):
    config = {**BERT_CONFIG, "embedding_size": 8, "hidden_act": "gelu_new"}
    tensors = _random_tensors(_original_shapes(config, heads=False), seed=7)
    prefix = write_tf1_checkpoint(tmp_path / "model.ckpt", tensors)
    backbone = load_bert_checkpoint(prefix, config)
    assert backbone.embedding_dim == 8
    assert backbone.activation == "gelu_approximate"
    # The reference uses erf GELU, so compare with erf here; the activation
    # mapping itself is asserted above.
    erf_backbone = load_bert_checkpoint(prefix, {**config, "hidden_act": "gelu"})
    _assert_matches_reference(erf_backbone, tensors, config, seed=3)
    # Without embedding_size the shapes disagree and the error says why.
    plain = {k: v for k, v in config.items() if k != "embedding_size"}
    with pytest.raises(ValueError, match="embedding_hidden_mapping_in.*embedding_size"):
        load_bert_checkpoint(prefix, plain)


def test_missing_checkpoint_and_config(original, tmp_path):
    prefix, config_path, _ = original
    with pytest.raises(FileNotFoundError, match=r"nope.*not found.*\.index"):
        load_bert_checkpoint(tmp_path / "nope", config_path)
    with pytest.raises(FileNotFoundError, match="missing.json"):
        load_bert_checkpoint(prefix, tmp_path / "missing.json")


def test_vocab_mismatch_names_variable_and_shapes(original, tmp_path):
    prefix, _, _ = original
    bad = write_config(tmp_path / "c.json", {**BERT_CONFIG, "vocab_size": 70})
    with pytest.raises(
        ValueError,
        match=r"bert_model\.ckpt.*'bert/embeddings/word_embeddings' has shape "
        r"\(60, 16\), the config expects \(70, 16\)",
    ):
        load_bert_checkpoint(prefix, bad)


def test_missing_variables_are_listed(original):
    prefix, _, _ = original
    with pytest.raises(ValueError, match=r"lacks 16 variable\(s\).*layer_2/"):
        load_bert_checkpoint(prefix, {**BERT_CONFIG, "num_hidden_layers": 3})


def test_missing_data_shard(original, tmp_path):
    prefix, config_path, _ = original
    copy = tmp_path / "bert_model.ckpt"
    with open(prefix + ".index", "rb") as src, open(f"{copy}.index", "wb") as dst:
        dst.write(src.read())
    with pytest.raises(ValueError, match="bert_model.ckpt"):
        load_bert_checkpoint(copy, config_path)


def test_unknown_hidden_act(tmp_path):
    path = write_config(tmp_path / "c.json", {**BERT_CONFIG, "hidden_act": "swish"})
    with pytest.raises(ValueError, match=r"c\.json.*unsupported hidden_act 'swish'"):
        bert_config_to_kwargs(path)


def test_config_translation():
    kwargs = bert_config_to_kwargs(BERT_CONFIG)
    assert kwargs == {
        "vocabulary_size": VOCAB,
        "num_layers": LAYERS,
        "num_heads": HEADS,
        "hidden_dim": HIDDEN,
        "intermediate_dim": INNER,
        "max_sequence_length": POSITIONS,
        "num_segments": 2,
        "dropout": 0.1,
        "embedding_dim": None,
        "activation": "gelu",
        "initializer_range": 0.02,
    }
    for act, ours in [("gelu_new", "gelu_approximate"), ("relu", "relu"),
                      ("gelu_approximate", "gelu_approximate")]:
        assert bert_config_to_kwargs({**BERT_CONFIG, "hidden_act": act})[
            "activation"
        ] == ours
    # Back again: the written config reads as the same arguments.
    assert bert_config_to_kwargs(kwargs_to_bert_config(kwargs)) == kwargs
    approx = {**kwargs, "activation": "gelu_approximate"}
    assert kwargs_to_bert_config(approx)["hidden_act"] == "gelu_new"
    with pytest.raises(ValueError, match="lacks required.*vocab_size"):
        bert_config_to_kwargs(
            {k: v for k, v in BERT_CONFIG.items() if k != "vocab_size"}
        )
    with pytest.raises(ValueError, match="silu"):
        kwargs_to_bert_config({**kwargs, "activation": "silu"})


def test_different_dropouts_warn():
    config = {**BERT_CONFIG, "attention_probs_dropout_prob": 0.2}
    with pytest.warns(UserWarning, match="attention_probs_dropout_prob=0.2"):
        assert bert_config_to_kwargs(config)["dropout"] == 0.1


def test_failed_save_leaves_no_files(original, tmp_path, monkeypatch):
    prefix, config_path, _ = original
    backbone = load_bert_checkpoint(prefix, config_path)
    real_write = tf1_checkpoint._write_bundle

    def write_half_then_fail(tmp_prefix, tensors):
        half = dict(list(tensors.items())[: len(tensors) // 2])
        real_write(tmp_prefix, half)
        raise RuntimeError("disk full")

    monkeypatch.setattr(tf1_checkpoint, "_write_bundle", write_half_then_fail)
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="disk full"):
        save_bert_checkpoint(backbone, out / "bert_model.ckpt")
    assert os.listdir(out) == []


def test_failed_publish_keeps_older_checkpoint(original, tmp_path, monkeypatch):
    prefix, config_path, tensors = original
    backbone = load_bert_checkpoint(prefix, config_path)
    target = str(tmp_path / "bert_model.ckpt")
    save_bert_checkpoint(backbone, target)
    before = sorted(os.listdir(tmp_path))

    # Change the weights, then fail on the last rename (the .index), after
    # the new data shard and config were already moved into place.
    backbone.pooler.dense.bias.assign(np.ones(HIDDEN, "float32"))
    real_rename = tf1_checkpoint._rename

    def fail_on_index(src, dst):
        if dst == target + ".index" and ".tmp-" in src:
            raise OSError("rename failed")
        real_rename(src, dst)

    monkeypatch.setattr(tf1_checkpoint, "_rename", fail_on_index)
    with pytest.raises(OSError, match="rename failed"):
        save_bert_checkpoint(backbone, target)
    assert sorted(os.listdir(tmp_path)) == before
    reader = tf.train.load_checkpoint(target)
    np.testing.assert_array_equal(
        reader.get_tensor("bert/pooler/dense/bias"), tensors["bert/pooler/dense/bias"]
    )


def test_untied_or_foreign_mlm_head_is_refused(original, tmp_path):
    prefix, config_path, _ = original
    backbone = load_bert_checkpoint(prefix, config_path)
    other = load_bert_checkpoint(prefix, config_path)
    mlm, _ = load_pretraining_heads(prefix, other)
    with pytest.raises(ValueError, match="not tied"):
        save_bert_checkpoint(backbone, tmp_path / "x.ckpt", masked_lm_head=mlm)
    assert os.listdir(tmp_path) == []
