"""Optimizers, learning-rate schedules and layer-wise decay: pure Keras,
nothing about runs. `tasks/` and `models/` import from here; the training
loop (`kerasbert.training`) builds on it.

Names load on first use, so `import kerasbert.optimizers` stays free of
Keras and TensorFlow until one is asked for.
"""

from kerasbert.io_utils import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "schedules": ("WarmupDecaySchedule", "InverseSquareRootSchedule"),
    "bert_optimizers": (
        "AdamW", "Lamb", "BertOptimizerMixin", "DEFAULT_WEIGHT_DECAY_EXCLUSIONS",
    ),
    "tensorflow_paths": ("deduplicate_gradient",),
    "optimization": ("create_optimizer",),
    "optimizer_options": ("OptimizerOptions",),
    "layer_decay": ("layer_depth", "layer_decay_multiplier"),
})
