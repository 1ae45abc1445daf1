"""Model Garden BertEncoder -> BertBackbone: parity on shared weights."""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
from official.nlp.modeling import networks

from kerasbert.convert import from_tf_models
from kerasbert.convert import from_tf_models_checkpoint
from kerasbert.convert.tf_models import detect_activation

sys.path.insert(0, os.path.dirname(__file__))
from peer_fixtures import assert_close_on_real_tokens  # noqa: E402
from peer_fixtures import tf_models_encoder  # noqa: E402

VOCAB, LAYERS, HIDDEN, HEADS, INNER, SEQ, POSITIONS = 60, 2, 16, 2, 32, 12, 24

CONFIG = dict(
    vocab_size=VOCAB,
    hidden_size=HIDDEN,
    num_layers=LAYERS,
    num_attention_heads=HEADS,
    max_sequence_length=POSITIONS,
    type_vocab_size=2,
    inner_dim=INNER,
)


def _erf_gelu(x):
    return tf_keras.activations.gelu(x, approximate=False)


def _inputs(seed=0, batch=3):
    """Random ids; row 0 full, rows 1.. padded from different lengths."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, VOCAB, size=(batch, SEQ)).astype("int32")
    lengths = [SEQ, 7, 3][:batch]
    mask = (np.arange(SEQ)[None, :] < np.array(lengths)[:, None]).astype("int32")
    types = np.zeros_like(ids)
    types[:, SEQ // 2 :] = 1
    ids, types = ids * mask, types * mask
    return dict(input_word_ids=ids, input_mask=mask, input_type_ids=types)


def _encoder(cls=networks.BertEncoder, **overrides):
    return tf_models_encoder(cls, seed=1, **{**CONFIG, **overrides})


def _peer_outputs(encoder, inputs):
    out = encoder({k: tf.constant(v) for k, v in inputs.items()})
    if isinstance(out, dict):
        return out["sequence_output"].numpy(), out["pooled_output"].numpy()
    return out[0].numpy(), out[1].numpy()  # BertEncoder, dict_outputs=False


def _assert_parity(encoder, ours, seed=0):
    inputs = _inputs(seed)
    want_seq, want_pooled = _peer_outputs(encoder, inputs)
    assert_close_on_real_tokens(ours(inputs), want_seq, want_pooled, inputs["input_mask"])


@pytest.mark.parametrize("cls", [networks.BertEncoder, networks.BertEncoderV2])
def test_default_activation_is_tanh_gelu_and_outputs_match(cls):
    encoder = _encoder(cls)
    ours = from_tf_models(encoder)
    assert ours.activation == "gelu_approximate"
    assert ours.num_layers == LAYERS and ours.vocabulary_size == VOCAB
    assert ours.max_sequence_length == POSITIONS and ours.num_segments == 2
    _assert_parity(encoder, ours)


def test_erf_gelu_outputs_match():
    encoder = _encoder(inner_activation=_erf_gelu)
    ours = from_tf_models(encoder)
    assert ours.activation == "gelu"
    _assert_parity(encoder, ours, seed=3)


def test_string_gelu_is_erf_and_relu_is_relu():
    assert detect_activation(tf_keras.activations.get("gelu")) == "gelu"
    assert detect_activation(tf_keras.activations.get("relu")) == "relu"


def test_factorised_embedding_matches():
    # Model Garden: sum -> LayerNorm over E -> dropout -> project E -> H,
    # the same order as BertEmbeddings.
    encoder = _encoder(networks.BertEncoderV2, embedding_width=8)
    ours = from_tf_models(encoder)
    assert ours.embedding_dim == 8
    _assert_parity(encoder, ours, seed=4)


@pytest.mark.parametrize("root", ["encoder", "model"])
def test_tf2_checkpoint_round_trip(tmp_path, root):
    encoder = _encoder()
    path = tf.train.Checkpoint(**{root: encoder}).write(str(tmp_path / "ckpt"))
    ours = from_tf_models_checkpoint(path, CONFIG, root=root)
    _assert_parity(encoder, ours, seed=5)


def test_tf2_checkpoint_written_by_v2_loads_nested_root(tmp_path):
    encoder = _encoder(networks.BertEncoderV2)
    nested = tf.train.Checkpoint(encoder_network=encoder)
    path = tf.train.Checkpoint(model=nested).write(str(tmp_path / "ckpt"))
    ours = from_tf_models_checkpoint(path, CONFIG, root="model.encoder_network")
    _assert_parity(encoder, ours, seed=6)


def test_tf2_checkpoint_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        from_tf_models_checkpoint(tmp_path / "nothing", CONFIG)
    path = tf.train.Checkpoint(encoder=_encoder()).write(str(tmp_path / "ckpt"))
    with pytest.raises(ValueError, match=r"root='model'.*\['encoder'\]"):
        from_tf_models_checkpoint(path, CONFIG, root="model")
    with pytest.raises(ValueError, match=r"does not fit.*\(60, 16\).*\(70, 16\)"):
        from_tf_models_checkpoint(path, {**CONFIG, "vocab_size": 70})
    with pytest.raises(ValueError, match="has 2 transformer layers.*builds 1"):
        from_tf_models_checkpoint(path, {**CONFIG, "num_layers": 1})


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(norm_first=True), "norm_first"),
        (dict(output_range=1), "output_range"),
        (dict(inner_activation="swish"), "Unsupported activation"),
    ],
)
def test_unsupported_setups_raise(overrides, message):
    encoder = networks.BertEncoderV2(**{**CONFIG, **overrides})
    with pytest.raises(ValueError, match=message):
        from_tf_models(encoder)


def test_rejects_other_objects():
    with pytest.raises(TypeError, match="BertEncoder"):
        from_tf_models(tf_keras.layers.Dense(3))
