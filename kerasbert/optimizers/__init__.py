"""Optimizers, learning-rate schedules and layer-wise decay: pure Keras,
nothing about runs. `tasks/` and `models/` import from here; the training
loop (`kerasbert.training`) builds on it.

Names load on first use, so `import kerasbert.optimizers` stays free of
Keras and TensorFlow until one is asked for.
"""

from kerasbert.io_utils import lazy_exports

_EXPORTS = {
    "WarmupDecaySchedule": "kerasbert.optimizers.schedules",
    "AdamW": "kerasbert.optimizers.bert_optimizers",
    "Lamb": "kerasbert.optimizers.bert_optimizers",
    "BertOptimizerMixin": "kerasbert.optimizers.bert_optimizers",
    "DEFAULT_WEIGHT_DECAY_EXCLUSIONS": "kerasbert.optimizers.bert_optimizers",
    "deduplicate_gradient": "kerasbert.optimizers.bert_optimizers",
    "create_optimizer": "kerasbert.optimizers.optimization",
    "layer_depth": "kerasbert.optimizers.layer_decay",
    "layer_decay_multiplier": "kerasbert.optimizers.layer_decay",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports("kerasbert.optimizers", _EXPORTS)
