"""Under a mixed policy every encoder keeps its residual stream in float32
(`kerasbert.layers.precision`): the products run in half precision, the
LayerNorms, dropouts and residual adds in float32."""

import keras
import numpy as np
import pytest

from kerasbert.layers.precision import full_precision_policy
from kerasbert.models import AlbertBackbone
from kerasbert.models import BertBackbone
from kerasbert.models import GptBackbone
from kerasbert.models import ModernBertBackbone
from kerasbert.testing import tiny_encoder_config
from kerasbert.testing import tiny_encoder_inputs

FAMILIES = {
    "bert": (BertBackbone, {}),
    "albert": (AlbertBackbone, {"embedding_dim": 8, "num_groups": 1}),
    "gpt": (GptBackbone, {}),
    "modernbert": (ModernBertBackbone, {"local_attention": 4}),
}


def dtype_of(x):
    return keras.backend.standardize_dtype(x.dtype)


@pytest.mark.parametrize("policy, expected", [
    ("mixed_bfloat16", "float32"), ("mixed_float16", "float32"),
    ("bfloat16", "bfloat16"), ("float32", "float32"),
])
def test_the_stream_policy_of_each_policy(policy, expected):
    assert full_precision_policy(policy).name == expected
    assert full_precision_policy(keras.dtype_policies.get(policy)).name == expected


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_sequence_outputs_are_float32_and_close_to_float32(family):
    cls, extra = FAMILIES[family]
    inputs = tiny_encoder_inputs()
    keras.utils.set_random_seed(0)
    reference = cls(**tiny_encoder_config(**extra, dropout=0.0))
    mixed = cls(**tiny_encoder_config(**extra, dropout=0.0), dtype="mixed_bfloat16")
    mixed.set_weights(reference.get_weights())
    expected, got = reference(inputs), mixed(inputs)
    for name in ("sequence_output", "encoder_outputs"):
        for tensor in keras.tree.flatten(got[name]):
            assert dtype_of(tensor) == "float32", (family, name)
    # Real tokens only: what a padded position holds is not a contract.
    real = inputs["input_mask"].astype(bool)
    np.testing.assert_allclose(np.asarray(got["sequence_output"])[real],
                               np.asarray(expected["sequence_output"])[real], atol=0.06)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_half_precision_weights_keep_one_dtype(family):
    # The policy of a bfloat16 export: weights and every op in bfloat16.
    cls, extra = FAMILIES[family]
    model = cls(**tiny_encoder_config(**extra), dtype="bfloat16")
    assert dtype_of(model(tiny_encoder_inputs())["sequence_output"]) == "bfloat16"


def test_training_step_runs_its_dropouts_in_float32():
    # Dropout on: the masks are drawn in float32 and the loss is finite.
    model = BertBackbone(**tiny_encoder_config(dropout=0.5), dtype="mixed_bfloat16")
    inputs = tiny_encoder_inputs()
    block = model.get_layer("transformer_layer_0")
    assert block.output_dropout.dtype_policy.name == "float32"
    assert block.attention.dropout_layer.dtype_policy.name == "float32"
    out = model(inputs, training=True)["sequence_output"]
    assert dtype_of(out) == "float32"
    assert np.all(np.isfinite(np.asarray(out)))
