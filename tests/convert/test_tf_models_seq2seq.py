"""Model Garden Seq2SeqTransformer <-> TransformerBackbone: the same logits
and the same beam-search outputs on the same weights."""

import numpy as np
import pytest
import tensorflow as tf
from official.nlp.modeling.models import seq2seq_transformer as s2s

from kerasbert.convert.tf_models_seq2seq import from_tf_models_seq2seq
from kerasbert.convert.tf_models_seq2seq import read_tf_models_seq2seq
from kerasbert.convert.tf_models_seq2seq import read_transformer
from kerasbert.convert.tf_models_seq2seq import set_transformer_weights
from kerasbert.convert.tf_models_seq2seq import to_tf_models_seq2seq
from kerasbert.models import TransformerBackbone
from kerasbert.tasks import Seq2SeqLM

from slow_marks import slow_covered_by

VOCAB, HIDDEN, LAYERS, HEADS, INNER, DECODE = 20, 16, 2, 2, 32, 10
EOS = 1  # Model Garden's end id; its decoder starts from id 0.


def _peer(seed=0, scale=0.5):
    """A built Model Garden model, every weight random (N(0, scale);
    LayerNorm gammas 1 + N(0, scale)), so no mapping mistake hides behind 0
    or 1."""
    tf.random.set_seed(seed)
    model = s2s.Seq2SeqTransformer(
        vocab_size=VOCAB, embedding_width=HIDDEN, decode_max_length=DECODE, eos_id=EOS,
        beam_size=4, alpha=0.6,
        encoder_layer=s2s.TransformerEncoder(num_layers=LAYERS, num_attention_heads=HEADS,
                                             intermediate_size=INNER),
        decoder_layer=s2s.TransformerDecoder(num_layers=LAYERS, num_attention_heads=HEADS,
                                             intermediate_size=INNER))
    source, target = _batch()
    model({"inputs": source, "targets": target})
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        value = rng.normal(0, scale, weight.shape)
        if "gamma" in weight.name:
            value += 1.0
        weight.assign(value.astype("float32"))
    return model


def _batch(seed=0, batch=6):
    """Sources of lengths 7..2 ending in EOS, right-padded; random targets."""
    rng = np.random.default_rng(seed)
    source = rng.integers(2, VOCAB, (batch, 7)).astype("int32")
    for row, length in enumerate(range(7, 7 - batch, -1)):
        source[row, length - 1] = EOS
        source[row, length:] = 0
    return source, rng.integers(2, VOCAB, (batch, 5)).astype("int32")


def _our_logits(backbone, source, target):
    # Model Garden shifts the targets right behind id 0 and masks nothing on
    # the target side.
    decoder = np.concatenate([np.zeros((len(target), 1), "int32"), target[:, :-1]], axis=1)
    return np.asarray(Seq2SeqLM(backbone)({
        "encoder_token_ids": source, "encoder_padding_mask": (source != 0).astype("int32"),
        "decoder_token_ids": decoder, "decoder_padding_mask": np.ones_like(decoder)}))


@pytest.fixture(scope="module")
def peer():
    return _peer()


@pytest.fixture(scope="module")
def ours(peer):
    return from_tf_models_seq2seq(peer, max_sequence_length=32)


def test_converted_config_is_model_gardens_layout(ours):
    assert isinstance(ours, TransformerBackbone)
    assert ours.norm_first and ours.position_encoding == "concatenated"
    assert (ours.vocabulary_size, ours.hidden_dim, ours.num_layers, ours.num_heads,
            ours.intermediate_dim) == (VOCAB, HIDDEN, LAYERS, HEADS, INNER)


def test_logits_equal(peer, ours):
    for seed in (0, 1):
        source, target = _batch(seed)
        expected = peer({"inputs": source, "targets": target}).numpy()
        got = _our_logits(ours, source, target)
        assert np.abs(expected).max() > 1.0  # the check bites
        np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)


def test_beam_search_outputs_equal_token_for_token(peer, ours):
    source, _ = _batch(2)
    expected = peer({"inputs": source})["outputs"].numpy()
    # The peer stops when every example has settled; ours always returns
    # max_length columns, zeros after the end id.
    padded = np.zeros((len(source), DECODE), "int32")
    padded[:, :expected.shape[1]] = expected
    got = np.asarray(Seq2SeqLM(ours).generate(
        source, (source != 0).astype("int32"), max_length=DECODE, start_id=0, end_id=EOS,
        beam_size=4, length_penalty=0.6))
    np.testing.assert_array_equal(got, padded)
    # Some beams end early, some run to the limit: both paths are compared.
    assert (got == EOS).any() and (got[:, -1] != 0).any()


def test_beam_search_equal_on_other_random_weights():
    # Random weights at another scale: beams that end after 2-3 tokens.
    model = _peer(seed=1, scale=0.1)
    source, _ = _batch(2)
    expected = model({"inputs": source})["outputs"].numpy()
    padded = np.zeros((len(source), DECODE), "int32")
    padded[:, :expected.shape[1]] = expected
    got = Seq2SeqLM(from_tf_models_seq2seq(model, max_sequence_length=32)).generate(
        source, (source != 0).astype("int32"), max_length=DECODE, start_id=0, end_id=EOS)
    np.testing.assert_array_equal(np.asarray(got), padded)


# 20 s: trains a copy model for 15 epochs so the beams really compete; the default suite
# compares the beam searches on the fixture's and on other random weights.
@slow_covered_by("tests/convert/test_tf_models_seq2seq.py::test_beam_search_outputs_equal_token_for_token",
                 "tests/convert/test_tf_models_seq2seq.py::test_beam_search_equal_on_other_random_weights")
def test_beam_search_equal_on_a_trained_model():
    # Random transformers repeat one token; a model trained to copy its
    # source writes varied sequences of varied lengths, so the beams really
    # compete. Trained here, written into a Model Garden model, searched by both.
    import keras

    rng = np.random.default_rng(0)
    rows = [list(rng.integers(2, VOCAB, rng.integers(2, 6))) for _ in range(96)]
    source = np.zeros((96, 7), "int32")
    decoder = np.zeros((96, 7), "int32")
    labels = np.zeros((96, 7), "int32")
    for i, tokens in enumerate(rows):
        source[i, :len(tokens) + 1] = tokens + [EOS]
        decoder[i, 1:len(tokens) + 1] = tokens  # Model Garden's start id is 0
        labels[i, :len(tokens) + 1] = tokens + [EOS]
    ours = TransformerBackbone(VOCAB, LAYERS, HEADS, HIDDEN, INNER, dropout=0.0,
                               max_sequence_length=32, norm_first=True,
                               position_encoding="concatenated")
    model = Seq2SeqLM(ours, label_smoothing=0.0)
    model.compile(optimizer=keras.optimizers.Adam(1e-2, beta_2=0.98))
    features = {"encoder_token_ids": source, "decoder_token_ids": decoder,
                "decoder_padding_mask": np.ones_like(decoder)}
    model.fit(features, labels, batch_size=32, epochs=15, verbose=0)
    peer = to_tf_models_seq2seq(ours, _peer(seed=7))
    test = source[:16]
    expected = peer({"inputs": test})["outputs"].numpy()
    padded = np.zeros((16, DECODE), "int32")
    padded[:, :expected.shape[1]] = expected
    got = np.asarray(model.generate(test, (test != 0).astype("int32"), max_length=DECODE,
                                    start_id=0, end_id=EOS))
    np.testing.assert_array_equal(got, padded)
    ends = [int(np.flatnonzero(row == EOS)[0]) for row in got if (row == EOS).any()]
    assert len(set(ends)) >= 3, got  # sequences of several lengths
    assert np.mean([len(set(row[row > 1])) for row in got]) >= 2, got  # varied tokens


def test_the_paper_layout_differs(peer):
    # The same weights in the paper's layout (post-LN, interleaved sinusoid)
    # give other logits: the switches matter and are not silently ignored.
    weights = read_tf_models_seq2seq(peer)
    paper = TransformerBackbone(VOCAB, LAYERS, HEADS, HIDDEN, INNER, dropout=0.0,
                                max_sequence_length=32, layer_norm_epsilon=1e-6,
                                norm_first=True)
    set_transformer_weights(paper, weights)
    source, target = _batch()
    expected = peer({"inputs": source, "targets": target}).numpy()
    assert np.abs(_our_logits(paper, source, target) - expected).max() > 1e-2


def test_ours_to_model_garden_round_trip(ours):
    target_model = _peer(seed=5)
    to_tf_models_seq2seq(ours, target_model)
    source, target = _batch(3)
    np.testing.assert_allclose(target_model({"inputs": source, "targets": target}).numpy(),
                               _our_logits(ours, source, target), atol=1e-5, rtol=1e-5)
    back = read_transformer(ours)
    np.testing.assert_array_equal(back["embeddings"],
                                  read_tf_models_seq2seq(target_model)["embeddings"])


def test_layout_mismatch_is_named(peer):
    post_ln = TransformerBackbone(VOCAB, LAYERS, HEADS, HIDDEN, INNER, max_sequence_length=32)
    with pytest.raises(ValueError, match="norm_first"):
        set_transformer_weights(post_ln, read_tf_models_seq2seq(peer))
    with pytest.raises(ValueError, match="norm_first"):
        to_tf_models_seq2seq(post_ln, peer)
