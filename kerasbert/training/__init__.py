"""Running training: strategies, the training loop, checkpoints, the
pretraining, fine-tuning and distillation runs (optimizers live in
`kerasbert.optimizers`).

Names load on first use, so importing `kerasbert.training` (e.g. by the CLI
for `kerasbert --help`) does not pull in Keras or TensorFlow.
"""

from kerasbert.io_utils import lazy_exports

_EXPORTS = {
    "resolve_strategy": "kerasbert.training.strategies",
    "TrainStep": "kerasbert.training.loop",
    "TrainingCheckpoint": "kerasbert.training.checkpoints",
    "PretrainConfig": "kerasbert.training.configs",
    "run_pretraining": "kerasbert.training.pretrain",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports("kerasbert.training", _EXPORTS)
