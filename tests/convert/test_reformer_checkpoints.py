"""The Hugging Face Reformer checkpoints (google/reformer-enwik8,
google/reformer-crime-and-punishment) map onto ReformerBackbone + CausalLM:
the committed fixtures (tests/convert/fixtures/reformer_*.json: config.json
and every tensor's name and shape) are used tensor for tensor with our
shapes, and a checkpoint written in the fixture's layout loads through the
hf:// handle from an offline Hugging Face cache, LM head included."""

import json
import os

import numpy as np
import pytest
from test_handles import SHA
from test_hf_checkpoint import write_hf
from test_hf_gpt import _Recording

from kerasbert.convert.hf_checkpoint import FAMILIES
from kerasbert.convert.hf_layout import Tensors
from kerasbert.convert.reformer_weights import lm_head_from_hf
from kerasbert.convert.reformer_weights import set_reformer_weights
from kerasbert.errors import UsageError
from kerasbert.models import Backbone
from kerasbert.models import ReformerBackbone
from kerasbert.models import get_preset
from kerasbert.models.reformer.reformer_backbone import layer_kinds
from kerasbert.tasks import CausalLM

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
PARAMETERS = {"reformer_enwik8": 148_654_080, "reformer_crime_and_punishment": 2_584_064}


def _fixture(name):
    with open(os.path.join(FIXTURES, f"{name}.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_published_names_map_onto_the_reformer(name):
    fixture = _fixture(name)
    cls, config_from_hf, _, _ = FAMILIES[fixture["config"]["model_type"]]
    assert cls is ReformerBackbone
    kwargs = config_from_hf(fixture["config"], name)
    # The preset is the checkpoint's architecture.
    preset = get_preset(fixture["preset"])["config"]
    assert layer_kinds(preset["attention_layers"], preset["num_layers"]) == \
        kwargs["attention_layers"]
    assert {k: kwargs[k] for k in preset if k != "attention_layers"} == \
        {k: v for k, v in preset.items() if k != "attention_layers"}
    # Every tensor but the LM head is used, with our shapes.
    tensors = _Recording({n: np.broadcast_to(np.float32(0.5), s)
                          for n, s in fixture["tensors"].items()})
    backbone = set_reformer_weights(ReformerBackbone(**kwargs), Tensors(tensors, name))
    assert set(fixture["tensors"]) - tensors.read == set(fixture["heads"])
    assert backbone.count_params() == PARAMETERS[name]
    assert all(np.all(np.asarray(v) == 0.5) for v in backbone.weights[:3])
    decoder, bias = lm_head_from_hf(tensors)
    assert decoder.shape == (kwargs["vocabulary_size"], backbone.output_dim)
    assert bias.shape == (kwargs["vocabulary_size"],)


def _random_checkpoint(fixture, seed=0):
    rng = np.random.RandomState(seed)
    return {n: (0.05 * rng.randn(*s)).astype("float32") for n, s in fixture["tensors"].items()}


def _hf_cache(cache, repo, tensors, config):
    folder = os.path.join(cache, "models--" + repo.replace("/", "--"))
    write_hf(os.path.join(folder, "snapshots", SHA), tensors, config)
    os.makedirs(os.path.join(folder, "refs"), exist_ok=True)
    with open(os.path.join(folder, "refs", "main"), "w") as f:
        f.write(SHA)


def test_crime_and_punishment_loads_through_the_hf_handle(tmp_path, monkeypatch):
    import huggingface_hub.constants as constants

    fixture = _fixture("reformer_crime_and_punishment")
    tensors = _random_checkpoint(fixture)
    tensors["reformer.encoder.layers.1.attention.self_attention.mask_value_float32"] = \
        np.full((), -1e9, "float32")  # an older transformers' buffer: skipped
    _hf_cache(str(tmp_path / "hub"), fixture["source"], tensors, fixture["config"])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)

    backbone = Backbone.from_preset("hf://" + fixture["source"])
    assert isinstance(backbone, ReformerBackbone) and backbone.causal
    emb = backbone.embeddings
    np.testing.assert_array_equal(emb.token_embedding.embeddings.numpy(),
                                  tensors["reformer.embeddings.word_embeddings.weight"])
    np.testing.assert_array_equal(
        emb.position_embedding.column_embeddings.numpy(),
        tensors["reformer.embeddings.position_embeddings.weights.1"][0])
    lsh = backbone.transformer_layers[1][0].inner
    np.testing.assert_array_equal(
        lsh.query_key_dense.kernel.numpy(),
        tensors["reformer.encoder.layers.1.attention.self_attention.query_key.weight"].T)
    ff = backbone.transformer_layers[5][1].inner
    np.testing.assert_array_equal(
        ff.output_dense.bias.numpy(),
        tensors["reformer.encoder.layers.5.feed_forward.output.dense.bias"])
    # The LM head comes with it into CausalLM, and it decodes.
    lm = CausalLM(backbone)
    np.testing.assert_array_equal(lm.lm_decoder.numpy(), tensors["lm_head.decoder.weight"])
    np.testing.assert_array_equal(lm.lm_bias.numpy(), tensors["lm_head.decoder.bias"])
    new = lm.generate([5, 6, 7, 8], max_new_tokens=3)
    assert len(new) == 3 and all(0 <= t < 320 for t in new)


def test_a_checkpoint_with_a_stray_tensor_is_refused(tmp_path):
    from kerasbert.convert import from_hf_directory

    fixture = _fixture("reformer_crime_and_punishment")
    tensors = _random_checkpoint(fixture)
    tensors["reformer.encoder.layers.9.attention.layer_norm.weight"] = np.ones(256, "float32")
    directory = write_hf(tmp_path / "ckpt", tensors, fixture["config"])
    with pytest.raises(UsageError, match="no place for: reformer.encoder.layers.9"):
        from_hf_directory(directory)
    config = dict(fixture["config"], axial_pos_embds=False)
    with pytest.raises(UsageError, match="axial position embeddings"):
        from_hf_directory(write_hf(tmp_path / "bad", _random_checkpoint(fixture), config))


def test_logits_equal_hugging_faces_on_its_own_checkpoint():
    """A tiny ReformerModelWithLMHead saved by transformers itself (random
    weights; tests/convert/fixtures/make_reformer_tiny_hf.py wrote it and
    its logits, with torch 2.14.1 and transformers 5.24.0): loaded through
    our loader and CausalLM, the logits at every real position equal
    Hugging Face's within 1e-5 (measured: 1.7e-6; the logits reach 5.3).
    Local layers run in chunks of 8 with causal and padding masks; the 16
    tokens fit one LSH chunk, where Hugging Face attends without hashing."""
    from kerasbert.convert import from_hf_directory

    directory = os.path.join(FIXTURES, "reformer_tiny_hf")
    expected = np.load(os.path.join(directory, "expected.npz"))
    backbone = from_hf_directory(directory)
    assert backbone.layer_kinds() == ["local", "lsh", "local", "lsh"]
    lm = CausalLM(backbone)
    ids, mask = expected["input_ids"], expected["input_mask"]
    logits = np.asarray(lm({"input_word_ids": ids, "input_mask": mask})["logits"])
    real = mask.astype(bool)
    np.testing.assert_allclose(logits[real], expected["logits"][real], atol=1e-5, rtol=1e-5)
