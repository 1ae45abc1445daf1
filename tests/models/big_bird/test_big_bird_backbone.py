import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

from kerasbert.layers import BlockSparseSelfAttention
from kerasbert.models import BertBackbone
from kerasbert.models import from_preset
from kerasbert.models.big_bird import BigBirdBackbone
from kerasbert.testing import TestCase
from kerasbert.testing import tiny_encoder_config
from kerasbert.testing import tiny_encoder_inputs

from slow_marks import slow_covered_by

# Blocks of 4, 1 random block: block-sparse above 28 tokens.
KWARGS = tiny_encoder_config(max_sequence_length=64, block_size=4, num_random_blocks=1)
INPUTS = tiny_encoder_inputs(length=40, padding=10)


class TestBigBirdBackbone(TestCase):
    def test_backbone_basics(self):
        # 40 tokens (sparse), then 20 (full) inside run_backbone_test; the
        # padding and SavedModel checks (unknown length in the signature:
        # the traced cond picks the path) run on the sparse path.
        self.run_backbone_test(BigBirdBackbone, KWARGS, INPUTS)

    def test_sparse_layers(self):
        model = BigBirdBackbone(**KWARGS)
        attention = [block.attention for block in model.transformer_layers]
        assert all(isinstance(a, BlockSparseSelfAttention) for a in attention)
        # One pattern per layer; every length up to the positions is covered.
        assert [a.seed for a in attention] == [0, 1]
        assert all(a.max_sequence_length == 64 for a in attention)
        assert not np.array_equal(attention[0].random_blocks(10)[0],
                                  attention[1].random_blocks(10)[0])

    def test_same_weights_as_bert_and_full_attention_option(self):
        """BigBird = BERT + block-sparse attention: with BERT's weights the
        short inputs (full attention) agree exactly, the long ones differ."""
        big_bird = BigBirdBackbone(**KWARGS)
        bert = BertBackbone(**{k: v for k, v in KWARGS.items()
                               if k not in ("block_size", "num_random_blocks")},
                            activation="gelu_approximate")
        full = BigBirdBackbone(**KWARGS, attention="full")
        assert [w.path for w in big_bird.weights] == [w.path for w in full.weights]
        bert.set_weights(big_bird.get_weights())
        full.set_weights(big_bird.get_weights())
        short = {k: v[:, :24] for k, v in INPUTS.items()}
        self.assertAllClose(bert(short), big_bird(short), atol=1e-6)
        self.assertAllClose(bert(INPUTS), full(INPUTS), atol=1e-6)
        diff = np.abs(np.asarray(bert(INPUTS)["sequence_output"])
                      - np.asarray(big_bird(INPUTS)["sequence_output"]))
        assert diff.max() > 1e-3

    def test_config_records_the_attention(self):
        model = BigBirdBackbone(**KWARGS)
        config = model.get_config()
        assert (config["attention"], config["block_size"], config["num_random_blocks"]) == (
            "bigbird", 4, 1)
        assert BigBirdBackbone.from_config(config).get_config() == config

    def test_masked_lm_pretrainer_runs_on_the_sparse_path(self):
        from kerasbert.tasks.bert_pretrainer import BertPretrainer

        model = BertPretrainer(BigBirdBackbone(**KWARGS), objectives=("mlm",))
        positions = np.array([[1, 5, 33], [2, 3, 29]], "int32")
        out = model({**INPUTS, "masked_lm_positions": positions})
        assert tuple(out["mlm_logits"].shape) == (2, 3, 50)
        self.assertAllFinite(out)

    def test_bad_attention_is_a_clear_error(self):
        with pytest.raises(ValueError, match='attention must be "full" or "bigbird"'):
            BigBirdBackbone(**{**KWARGS, "attention": "sparse"})


class TestBigBirdPresets(TestCase):
    def test_bigbird_roberta_base_parameter_count_by_parts(self):
        # The whole model takes ~15 s to build on 2 cores (slow test
        # below); here one layer at the preset's widths, plus the tables.
        one_layer = BigBirdBackbone.from_preset(
            "bigbird_roberta_base", num_layers=1, vocabulary_size=1,
            max_sequence_length=1, num_segments=1)
        pooler = 768 * 768 + 768
        per_layer = one_layer.count_params() - pooler - (1 + 1 + 1 + 2) * 768
        assert per_layer == 4 * (768 * 768 + 768) + 2 * 768 * 3072 + 3072 + 768 + 4 * 768
        embeddings = (50358 + 4096 + 2) * 768 + 2 * 768  # tokens, positions, types, LN
        assert embeddings + 12 * per_layer + pooler == 127_468_800

    # ~15 s: builds bigbird_roberta_base whole; the default suite adds up one layer at its widths.
    @slow_covered_by(
        "tests/models/big_bird/test_big_bird_backbone.py::TestBigBirdPresets::test_bigbird_roberta_base_parameter_count_by_parts",
        "tests/models/big_bird/test_big_bird_backbone.py::TestBigBirdBackbone::test_config_records_the_attention")
    def test_bigbird_roberta_base_parameter_count(self):
        model = from_preset("bigbird_roberta_base")
        assert isinstance(model, BigBirdBackbone)
        assert model.count_params() == 127_468_800
        assert model.embeddings.position_embedding.position_embeddings.shape == (4096, 768)
        assert model.pooler is not None
        config = model.get_config()
        assert (config["vocabulary_size"], config["num_segments"], config["activation"],
                config["block_size"], config["num_random_blocks"]) == (
            50358, 2, "gelu_approximate", 64, 3)


JAX_SCRIPT = """
import sys
import numpy as np, keras
assert keras.config.backend() == "jax"
from kerasbert.models import BigBirdBackbone
model = BigBirdBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
                        intermediate_dim=16, max_sequence_length=64, block_size=4,
                        num_random_blocks=1)
ids = np.arange(80, dtype="int32").reshape(2, 40) % 30
mask = np.array([[1] * 40, [1] * 25 + [0] * 15], "int32")
out = model({"input_word_ids": ids, "input_mask": mask, "input_type_ids": 0 * ids})
np.save(sys.argv[1], np.asarray(out["sequence_output"]))
np.save(sys.argv[2], np.concatenate([np.ravel(w) for w in model.get_weights()]))
print("ok", type(out["sequence_output"]).__module__)
"""


# ~25 s: a fresh Python importing JAX runs the block-sparse path against TensorFlow's
# outputs; the default suite runs BERT-family encoders under JAX and the sparse path in TF.
@slow_covered_by("tests/models/test_backend_independence.py::test_encoders_and_gpt_run_under_jax",
                 "tests/models/big_bird/test_big_bird_backbone.py::TestBigBirdBackbone::test_backbone_basics")
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_runs_under_jax_like_tensorflow(tmp_path):
    """The same layer code (keras.ops only) under JAX gives TensorFlow's
    outputs on the same weights, on the block-sparse path. Slow: a fresh
    Python importing JAX, Keras and TensorFlow takes ~25 s on 2 cores."""
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    out, weights = tmp_path / "out.npy", tmp_path / "w.npy"
    result = subprocess.run([sys.executable, "-c", JAX_SCRIPT, str(out), str(weights)],
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("ok jax")
    model = BigBirdBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8,
                            intermediate_dim=16, max_sequence_length=64, block_size=4,
                            num_random_blocks=1)
    flat, start, values = np.load(weights), 0, []
    for w in model.get_weights():
        values.append(flat[start:start + w.size].reshape(w.shape))
        start += w.size
    model.set_weights(values)
    ids = np.arange(80, dtype="int32").reshape(2, 40) % 30
    mask = np.array([[1] * 40, [1] * 25 + [0] * 15], "int32")
    ours = model({"input_word_ids": ids, "input_mask": mask, "input_type_ids": 0 * ids})
    np.testing.assert_allclose(np.asarray(ours["sequence_output"]), np.load(out), atol=1e-4)
