"""Running training: strategies, the training loop, checkpoints, the
pretraining, fine-tuning and distillation runs (optimizers live in
`kerasbert.optimizers`).

Names load on first use, so importing `kerasbert.training` (e.g. by the CLI
for `kerasbert --help`) does not pull in Keras or TensorFlow.
"""

from kerasbert.io_utils import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "strategies": ("resolve_strategy",),
    "loop": ("TrainStep",),
    "checkpoints": ("TrainingCheckpoint",),
    "configs": ("PretrainConfig",),
    "pretrain": ("run_pretraining",),
})
