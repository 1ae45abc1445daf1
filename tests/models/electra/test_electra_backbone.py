import numpy as np
import pytest

from kerasbert.models import ElectraBackbone
from kerasbert.models import from_preset
from kerasbert.models import list_presets
from kerasbert.models.electra.electra_presets import ELECTRA_PARAMETER_COUNTS
from kerasbert.testing import TestCase
from kerasbert.testing import tiny_encoder_config
from kerasbert.testing import tiny_encoder_inputs

from slow_marks import slow_covered_by

KWARGS = tiny_encoder_config(embedding_dim=8)
INPUTS = tiny_encoder_inputs()


def generator_of(discriminator, hidden_dim=4, num_heads=1, **overrides):
    config = {**KWARGS, "hidden_dim": hidden_dim, "num_heads": num_heads,
              "intermediate_dim": 4 * hidden_dim, **overrides}
    return ElectraBackbone(**config, shared_embeddings=discriminator.embeddings)


class TestElectraBackbone(TestCase):
    def test_backbone_basics(self):
        self.run_backbone_test(ElectraBackbone, KWARGS)

    def test_factorized_embedding_shapes(self):
        model = ElectraBackbone(**KWARGS)
        assert tuple(model.token_embedding.embeddings.shape) == (50, 8)
        assert tuple(model.embeddings.projection.kernel.shape) == (8, 16)
        # E == H: no projection (ELECTRA-Base / Large).
        unfactorised = ElectraBackbone(**{**KWARGS, "embedding_dim": None})
        assert unfactorised.embeddings.projection is None
        assert tuple(unfactorised.token_embedding.embeddings.shape) == (50, 16)

    def test_defaults_follow_electra(self):
        model = ElectraBackbone(**tiny_encoder_config(num_layers=1))
        # google-research/electra's modeling.py gelu is the erf form.
        assert model.activation == "gelu" and model.dropout == 0.1
        assert model.embedding_dim is None and not model.shares_embeddings

    def test_bigbird_attention_option(self):
        full = ElectraBackbone(**KWARGS)
        sparse = ElectraBackbone(**KWARGS, attention="bigbird", block_size=2,
                                 num_random_blocks=1)
        assert sparse.get_config()["attention"] == "bigbird"
        sparse.set_weights(full.get_weights())  # same weights either way
        # 8 tokens < (5 + 2 x 1) x 2: BigBird falls back to full attention.
        self.assertAllClose(full(INPUTS)["sequence_output"],
                            sparse(INPUTS)["sequence_output"], atol=1e-5)

    def test_bad_heads(self):
        with pytest.raises(ValueError, match="divisible by num_heads"):
            ElectraBackbone(**{**KWARGS, "num_heads": 3})


class TestSharedEmbeddings(TestCase):
    def test_generator_reads_the_discriminator_tables(self):
        disc = ElectraBackbone(**KWARGS)
        gen = generator_of(disc)
        assert gen.shares_embeddings and gen.token_embedding is disc.token_embedding
        out = gen(INPUTS)
        assert tuple(out["sequence_output"].shape) == (2, 8, 4)
        own = {id(w) for w in gen.weights}
        # The shared tables and LayerNorm are the generator's weights too ...
        emb = disc.embeddings
        for w in (emb.token_embedding.embeddings, emb.position_embedding.position_embeddings,
                  emb.segment_embedding.embeddings, emb.layer_norm.gamma):
            assert id(w) in own, w.path
        # ... but not the discriminator's 8 -> 16 projection: it has its own 8 -> 4.
        assert id(emb.projection.kernel) not in own
        assert tuple(gen.embeddings_projection.kernel.shape) == (8, 4)
        # Changing a shared table changes the generator's output.
        before = np.asarray(gen(INPUTS)["sequence_output"])
        table = emb.token_embedding.embeddings
        table.assign(table.numpy() + 0.5)
        assert not np.allclose(before, np.asarray(gen(INPUTS)["sequence_output"]))

    def test_generator_config_has_no_shared_layer(self):
        gen = generator_of(ElectraBackbone(**KWARGS))
        config = gen.get_config()
        assert "shared_embeddings" not in config and config["hidden_dim"] == 4
        # Stand-alone, the same config builds its own embeddings.
        alone = ElectraBackbone.from_config(config)
        assert not alone.shares_embeddings
        assert tuple(alone.embeddings.projection.kernel.shape) == (8, 4)

    def test_generator_at_embedding_width_has_no_projection(self):
        gen = generator_of(ElectraBackbone(**KWARGS), hidden_dim=8, num_heads=2)
        assert gen.embeddings_projection is None
        assert tuple(gen(INPUTS)["sequence_output"].shape) == (2, 8, 8)

    @pytest.mark.parametrize("override, message", [
        ({"vocabulary_size": 51}, "vocabulary_size 50"),
        ({"max_sequence_length": 16}, "max_sequence_length 12"),
        ({"embedding_dim": 4}, "embedding width 8"),
    ])
    def test_mismatched_shared_embeddings(self, override, message):
        disc = ElectraBackbone(**KWARGS)
        with pytest.raises(ValueError, match=message):
            generator_of(disc, **override)

    def test_shared_embeddings_must_be_an_embedding_layer(self):
        with pytest.raises(TypeError, match="BertEmbeddings"):
            ElectraBackbone(**KWARGS, shared_embeddings=object())


class TestElectraPresets(TestCase):
    def test_electra_small_parameter_count(self):
        model = ElectraBackbone.from_preset("electra_small")
        # 13,548,800 with the pooler, as keras-hub's ElectraBackbone.
        assert model.count_params() == 13_548_800 == ELECTRA_PARAMETER_COUNTS["electra_small"]
        assert (model.num_layers, model.hidden_dim, model.num_heads) == (12, 256, 4)
        assert (model.embedding_dim, model.intermediate_dim) == (128, 1024)

    def test_registered(self):
        assert list_presets("electra") == ["electra_base", "electra_large", "electra_small"]
        assert isinstance(from_preset("electra_base", num_layers=1), ElectraBackbone)

    # Builds electra_base and electra_large whole (109M / 335M weights); the default suite
    # counts electra_small built whole and BERT-Base / -Large's sizes by parts.
    @slow_covered_by(
        "tests/models/electra/test_electra_backbone.py::TestElectraPresets::test_electra_small_parameter_count",
        "tests/models/bert/test_bert_backbone.py::TestBertPresets::test_published_parameter_counts_by_parts")
    @pytest.mark.parametrize("name", ["electra_base", "electra_large"])
    def test_published_parameter_counts(self, name):
        # base 109,482,240 and large 335,141,888: BERT-Base / -Large sizes.
        model = ElectraBackbone.from_preset(name)
        assert model.count_params() == ELECTRA_PARAMETER_COUNTS[name]
