"""The tensor names and shapes of published Hugging Face checkpoints, kept
as committed fixtures (tests/convert/fixtures/*.json: config.json values and
every tensor's name and shape, as transformers' modules name them), map onto
our families: every encoder tensor is used, the shapes are the built model's,
and what is left is exactly the pretraining head the fixture lists (not
loaded yet). BigBird's weights are BERT's: a checkpoint computes the same
as BERT with them on inputs short enough for full attention."""

import json
import os

import numpy as np
import pytest
from test_hf_checkpoint import hf_config, hf_tensors, write_hf
from test_hf_gpt import _Recording, _shapes

from kerasbert.convert import from_hf_directory
from kerasbert.convert.bert_weights import get_bert_weights
from kerasbert.convert.hf_checkpoint import FAMILIES
from kerasbert.convert.hf_layout import Tensors
from kerasbert.models import BigBirdBackbone
from kerasbert.models import get_preset

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


@pytest.mark.parametrize("name", ["bigbird_roberta_base", "electra_small_discriminator",
                                  "electra_small_generator"])
def test_published_names_map_onto_our_family(name):
    fixture = json.load(open(os.path.join(FIXTURES, f"{name}.json")))
    cls, config_from_hf, weights_from_hf, _ = FAMILIES[fixture["config"]["model_type"]]
    tensors = _Recording({n: np.broadcast_to(np.float32(0), s)
                          for n, s in fixture["tensors"].items()})
    kwargs = config_from_hf(fixture["config"], name)
    weights = weights_from_hf(Tensors(tensors, name), kwargs)
    assert set(fixture["tensors"]) - tensors.read == set(fixture["heads"])
    if fixture["preset"]:
        preset = get_preset(fixture["preset"])
        assert preset["backbone_class"] is cls
        assert {k: kwargs[k] for k in kwargs if k in preset["config"]} == {
            k: preset["config"][k] for k in kwargs if k in preset["config"]}
    built = get_bert_weights(cls(**kwargs))
    if "pooler_kernel" not in weights:  # ELECTRA publishes no pooler
        built.pop("pooler_kernel"), built.pop("pooler_bias")
    assert _shapes(weights) == _shapes(built)


def test_big_bird_checkpoints_compute_what_bert_computes_on_short_inputs(tmp_path):
    tensors = {"bert." + k: v for k, v in hf_tensors().items()}
    bert = from_hf_directory(write_hf(tmp_path / "bert", tensors, hf_config()))
    config = hf_config(model_type="big_bird", attention_type="block_sparse", block_size=2,
                       num_random_blocks=1, hidden_act="gelu_new")
    big_bird = from_hf_directory(write_hf(tmp_path / "big_bird", tensors, config))
    assert isinstance(big_bird, BigBirdBackbone)
    assert (big_bird.attention, big_bird.block_size, big_bird.num_random_blocks) == ("bigbird", 2, 1)
    ids = np.arange(10, dtype="int32")[None] % 50
    inputs = {"input_word_ids": ids, "input_mask": np.ones_like(ids),
              "input_type_ids": np.zeros_like(ids)}
    bert_again = from_hf_directory(write_hf(tmp_path / "bert_tanh", tensors,
                                            hf_config(hidden_act="gelu_new")))
    np.testing.assert_allclose(np.asarray(big_bird(inputs)["sequence_output"]),
                               np.asarray(bert_again(inputs)["sequence_output"]), atol=1e-5)
    assert bert.activation == "gelu" and big_bird.activation == "gelu_approximate"
