"""Optimizers, schedules, strategies, the training loop, checkpoints.

Names load on first use, so importing `kerasbert.training` (e.g. by the CLI
for `kerasbert --help`) does not pull in Keras or TensorFlow.
"""

from kerasbert.io_utils import lazy_exports

_EXPORTS = {
    "WarmupDecaySchedule": "kerasbert.training.schedules",
    "AdamW": "kerasbert.training.optimizers",
    "Lamb": "kerasbert.training.optimizers",
    "BertOptimizerMixin": "kerasbert.training.optimizers",
    "DEFAULT_WEIGHT_DECAY_EXCLUSIONS": "kerasbert.training.optimizers",
    "deduplicate_gradient": "kerasbert.training.optimizers",
    "create_optimizer": "kerasbert.training.optimization",
    "layer_depth": "kerasbert.training.layer_decay",
    "layer_decay_multiplier": "kerasbert.training.layer_decay",
    "resolve_strategy": "kerasbert.training.strategies",
    "TrainStep": "kerasbert.training.loop",
    "TrainingCheckpoint": "kerasbert.training.checkpoints",
    "PretrainConfig": "kerasbert.training.pretrain",
    "run_pretraining": "kerasbert.training.pretrain",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports("kerasbert.training", _EXPORTS)
