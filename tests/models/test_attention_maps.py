"""attention_maps: one [B, N, T, T] probability map per block application."""

import math

import numpy as np
import pytest

from kerasbert.layers import padding_mask_to_attention_bias
from kerasbert.models import AlbertBackbone
from kerasbert.models import BertBackbone
from kerasbert.models import GptBackbone
from kerasbert.models import RobertaBackbone
from kerasbert.models import attention_maps
from kerasbert.models import plot_attention

TINY = dict(vocabulary_size=40, num_heads=2, hidden_dim=8, intermediate_dim=16,
            max_sequence_length=16, dropout=0.1)
RNG = np.random.RandomState(7)
INPUTS = {
    "input_word_ids": RNG.randint(3, 40, (2, 7)).astype("int32"),
    "input_mask": np.array([[1] * 7, [1] * 4 + [0] * 3], "int32"),
    "input_type_ids": np.array([[0] * 3 + [1] * 4, [0] * 7], "int32"),
}


def _check_maps(maps, count, heads=2):
    assert len(maps) == count
    mask = INPUTS["input_mask"].astype(bool)
    for probs in maps:
        assert probs.dtype == np.float32 and probs.shape == (2, heads, 7, 7)
        np.testing.assert_allclose(probs.sum(-1), 1.0, atol=1e-5)
        # Padded keys get nothing, for every query (padded ones included).
        assert np.all(probs[1][:, :, ~mask[1]] == 0.0)


def test_bert_maps_match_a_manual_computation():
    model = BertBackbone(num_layers=2, **TINY)
    maps = attention_maps(model, INPUTS)
    _check_maps(maps, 2)
    # Layer 2's map from its weights and layer 1's output (dropout off).
    hidden = np.asarray(model(INPUTS, training=False)["encoder_outputs"][0])
    attention = model.transformer_layers[1].attention
    kernel, bias = (np.asarray(w) for w in attention.qkv_dense.weights)
    qkv = hidden @ kernel + bias  # [B, T, 3H], columns [q | k | v], head-major
    query, key = qkv[..., :8], qkv[..., 8:16]
    split = lambda t: t.reshape(2, 7, 2, 4).transpose(0, 2, 1, 3)  # noqa: E731
    scores = split(query) @ split(key).transpose(0, 1, 3, 2) / math.sqrt(4)
    scores = scores + np.asarray(padding_mask_to_attention_bias(INPUTS["input_mask"]))
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    np.testing.assert_allclose(maps[1], expected, atol=1e-5)


def test_albert_shared_blocks_give_one_map_per_application():
    model = AlbertBackbone(num_layers=3, embedding_dim=4, num_inner_repetitions=2, **TINY)
    maps = attention_maps(model, INPUTS)
    _check_maps(maps, 6)  # 3 layers x 2 blocks, 2 distinct blocks
    # Each application's map is its shared block on that application's
    # input: application 2 (block 0 again) reads layer 1's output.
    outputs = model(INPUTS, training=False)["encoder_outputs"]
    bias = padding_mask_to_attention_bias(INPUTS["input_mask"])
    for index, layer in ((2, 0), (4, 1)):
        _, expected = model.transformer_layers[index].attention(
            outputs[layer], bias, return_attention_scores=True)
        np.testing.assert_allclose(maps[index], np.asarray(expected), atol=1e-6)
    assert not np.allclose(maps[0], maps[2])  # same block, different input


def test_roberta_and_task_model():
    from kerasbert.tasks import TextClassifier

    model = RobertaBackbone(num_layers=2, **{**TINY, "max_sequence_length": 20})
    maps = attention_maps(model, INPUTS)
    _check_maps(maps, 2)
    # A task model is looked through to its backbone.
    classifier_maps = attention_maps(TextClassifier(model, num_classes=2), INPUTS)
    np.testing.assert_allclose(classifier_maps[1], maps[1], atol=1e-6)


def test_gpt_maps_are_causal():
    model = GptBackbone(num_layers=2, **TINY)
    maps = attention_maps(model, {k: v for k, v in INPUTS.items() if k != "input_type_ids"})
    _check_maps(maps, 2)
    upper = np.triu(np.ones((7, 7), bool), k=1)
    for probs in maps:
        assert np.all(probs[..., upper] == 0.0)
        assert probs[0, :, 0, 0] == pytest.approx(1.0)  # the first token sees itself only


def test_bad_inputs_and_plot():
    model = BertBackbone(num_layers=1, **TINY)
    with pytest.raises(ValueError, match="input_mask"):
        attention_maps(model, {"input_word_ids": INPUTS["input_word_ids"]})
    with pytest.raises(TypeError, match="backbone"):
        attention_maps(object(), INPUTS)
    probs = attention_maps(model, INPUTS)[0]
    tokens = ["[CLS]", "a", "b", "[SEP]"]
    fig = plot_attention(tokens, probs[1], title="layer 1")  # [N, T, T]: a panel per head
    assert len(fig.axes) == 4  # 2 heads + 2 colour bars
    fig = plot_attention(tokens, probs[1, 0], title="head 1")
    assert fig.axes[0].get_title() == "head 1"
    assert fig.axes[0].images[0].get_array().shape == (4, 4)


def test_distilbert_electra_and_block_sparse_bigbird():
    from kerasbert.models import BigBirdBackbone
    from kerasbert.models import DistilBertBackbone
    from kerasbert.models import ElectraBackbone

    _check_maps(attention_maps(DistilBertBackbone(num_layers=1, **TINY), INPUTS), 1)
    _check_maps(attention_maps(ElectraBackbone(num_layers=2, embedding_dim=4, **TINY), INPUTS), 2)
    # 48 tokens in blocks of 4 is above the full-attention threshold
    # ((5 + 2 * 1) * 4 = 28): the block-sparse path scatters its probabilities.
    model = BigBirdBackbone(num_layers=2, **{**TINY, "max_sequence_length": 48},
                            block_size=4, num_random_blocks=1)
    mask = np.ones((1, 48), "int32")
    mask[0, 40:] = 0
    inputs = {"input_word_ids": RNG.randint(3, 40, (1, 48)).astype("int32"), "input_mask": mask}
    maps = attention_maps(model, inputs)
    assert len(maps) == 2 and maps[0].shape == (1, 2, 48, 48)
    np.testing.assert_allclose(maps[0].sum(-1), 1.0, atol=1e-5)
    assert np.all(maps[0][..., 40:] == 0.0)
    attention = model.transformer_layers[0].attention
    assert attention.uses_block_sparse(48)
    # Sparse: a middle query block sees 5 + 1 of its 12 key blocks at most.
    pattern = np.asarray(attention.attention_pattern(mask))
    np.testing.assert_array_equal(maps[0] > 0, pattern > 0)
    assert (maps[0][0, :, 20] > 0).sum(-1).max() <= 6 * 4


def test_modernbert_local_layers_see_only_their_window():
    """Pre-LN blocks are asked on their normalised input; a local layer's
    rows are 0 outside |t - s| <= local_attention // 2."""
    from kerasbert.models import ModernBertBackbone

    model = ModernBertBackbone(num_layers=2, local_attention=4, **TINY)
    maps = attention_maps(model, INPUTS)
    _check_maps(maps[:1], 1)  # the global layer as BERT's
    # (_check_maps' padded-key rule does not hold for a padded query whose
    # window holds no real key: its row is uniform, as the layers give)
    assert len(maps) == 2 and maps[1].shape == (2, 2, 7, 7)
    np.testing.assert_allclose(maps[1].sum(-1), 1.0, atol=1e-5)
    distance = np.abs(np.arange(7)[:, None] - np.arange(7)[None, :])
    real = INPUTS["input_mask"].astype(bool)
    for row in range(2):  # real queries (a padded one sees no real key at all)
        assert np.all(maps[1][row][:, real[row]][:, distance[real[row]] > 2] == 0.0)
    assert np.any(maps[0][0, :, 0, 5] > 0.0)  # the global layer sees far keys
