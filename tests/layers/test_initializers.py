"""Building a model for a checkpoint skips the random draw (NaN fill), and
whatever the checkpoint does not write still gets BERT's initial values."""

import keras
import numpy as np

from kerasbert.layers.initializers import bert_initializer
from kerasbert.layers.initializers import loads_checkpoint
from kerasbert.models import BertBackbone

TINY = dict(vocabulary_size=50, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
            max_sequence_length=12)


def test_weights_a_loader_does_not_write_get_berts_initial_values():
    table = np.arange(50 * 8, dtype="float32").reshape(50, 8)

    @loads_checkpoint
    def load():
        backbone = BertBackbone(**TINY, initializer_range=0.5)
        # Inside the loader every truncated-normal weight starts NaN.
        assert np.isnan(backbone.pooler.dense.kernel.numpy()).all()
        backbone.embeddings.token_embedding.embeddings.assign(table)
        return backbone

    backbone = load()
    np.testing.assert_array_equal(backbone.embeddings.token_embedding.embeddings.numpy(), table)
    for variable in backbone.weights:
        assert np.isfinite(variable.numpy()).all(), variable.path
    kernel = backbone.pooler.dense.kernel.numpy()
    assert 0.3 < kernel.std() < 0.6 and np.abs(kernel).max() <= 2 * 0.5 + 1e-6  # truncated
    np.testing.assert_array_equal(backbone.pooler.dense.bias.numpy(), 0.0)
    np.testing.assert_array_equal(backbone.embeddings.layer_norm.gamma.numpy(), 1.0)


def test_outside_a_loader_the_initializer_is_berts():
    assert type(bert_initializer(0.02)) is keras.initializers.TruncatedNormal
    backbone = BertBackbone(**TINY)
    assert all(np.isfinite(v.numpy()).all() for v in backbone.weights)

    @loads_checkpoint
    def load():
        return BertBackbone(**TINY)

    loaded = load()
    # A layer built inside a loader that initialises again later draws values.
    initializer = loaded.pooler.dense.kernel_initializer
    assert np.isfinite(keras.ops.convert_to_numpy(initializer((4, 4)))).all()
