"""Learning-rate schedules: BERT's linear warm-up then polynomial decay, and
the Transformer's inverse square root."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasbert")
class WarmupDecaySchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up to a peak, then polynomial decay to an end value.

    This is the BERT schedule (google-research/bert `optimization.py`, and
    Model Garden's `LinearWarmup` over `PolynomialDecay`):

        step < warmup_steps:  lr = peak * step / warmup_steps
        otherwise:            lr = (peak - end) * (1 - s / decay_steps) ** power
                                   + end,   s = min(step, decay_steps)

    Convention: the decay runs over the *whole* run (`decay_steps` is the
    total number of training steps, counted from step 0) and the warm-up
    overrides its first `warmup_steps` values, exactly as in BERT, so the
    published BERT/ELECTRA recipes reproduce step for step. The consequence
    is that the learning rate right after warm-up is
    `peak * (1 - warmup_steps / decay_steps) ** power`, slightly below the
    peak (for the usual 1-10% warm-up the difference is negligible).
    After `decay_steps` the rate stays at `end_learning_rate`.

    `step` is the number of optimizer *updates* already applied (0 for the
    first update). `kerasbert.training` optimizers pass the update count even
    under gradient accumulation (plain Keras optimizers pass micro-steps).

    Only `keras.ops` is used: the schedule runs under every backend.

    Args:
        peak_learning_rate: float. The rate at the end of warm-up.
        warmup_steps: int >= 0. 0 disables warm-up.
        decay_steps: int > 0. Total training steps; the decay reaches
            `end_learning_rate` there.
        end_learning_rate: float. Final rate (0 in BERT).
        power: float. 1 is linear decay (BERT); 2 decays faster early on.
        name: optional str.

    Example:

    >>> from kerasbert.optimizers import WarmupDecaySchedule
    >>> schedule = WarmupDecaySchedule(peak_learning_rate=1e-4, warmup_steps=10, decay_steps=100)
    >>> [round(float(schedule(step)), 8) for step in (0, 5, 10, 55, 100, 200)]
    [0.0, 5e-05, 9e-05, 4.5e-05, 0.0, 0.0]
    """

    def __init__(
        self,
        peak_learning_rate,
        warmup_steps,
        decay_steps,
        end_learning_rate=0.0,
        power=1.0,
        name=None,
    ):
        super().__init__()
        if decay_steps is None or int(decay_steps) <= 0:
            raise ValueError(
                f"decay_steps must be a positive number of steps, got "
                f"{decay_steps!r}."
            )
        if warmup_steps is None or int(warmup_steps) < 0:
            raise ValueError(
                f"warmup_steps must be >= 0, got {warmup_steps!r}."
            )
        if int(warmup_steps) > int(decay_steps):
            raise ValueError(
                f"warmup_steps ({warmup_steps}) exceeds decay_steps "
                f"({decay_steps}), the total number of training steps."
            )
        self.peak_learning_rate = float(peak_learning_rate)
        self.warmup_steps = int(warmup_steps)
        self.decay_steps = int(decay_steps)
        self.end_learning_rate = float(end_learning_rate)
        self.power = float(power)
        self.name = name

    def __call__(self, step):
        step = ops.cast(step, "float32")
        peak = self.peak_learning_rate
        end = self.end_learning_rate
        progress = ops.minimum(step, float(self.decay_steps)) / float(
            self.decay_steps
        )
        decayed = (peak - end) * ops.power(1.0 - progress, self.power) + end
        if self.warmup_steps == 0:
            return decayed
        warmup = peak * step / float(self.warmup_steps)
        return ops.where(step < float(self.warmup_steps), warmup, decayed)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "warmup_steps": self.warmup_steps,
            "decay_steps": self.decay_steps,
            "end_learning_rate": self.end_learning_rate,
            "power": self.power,
            "name": self.name,
        }


@keras.saving.register_keras_serializable(package="kerasbert")
class InverseSquareRootSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """The Transformer's learning rate (Vaswani et al., 2017, section 5.3):

        lr = scale * hidden_dim^-0.5 * min(n^-0.5, n * warmup_steps^-1.5)

    with n the 1-based step number: linear warm-up over `warmup_steps`
    steps to scale * (hidden_dim * warmup_steps)^-0.5 (7.0e-4 for the base
    model's 512 and 4000), then decay with the inverse square root of the
    step. The paper uses Adam with beta_1 0.9, beta_2 0.98, epsilon 1e-9.

    `step` is the number of optimizer updates already applied (Keras's
    `iterations`, 0 for the first update), so the first update uses n = 1.

    Args:
        hidden_dim: int, d_model.
        warmup_steps: int > 0 (4000 in the paper).
        scale: float, a factor on the whole schedule (1.0 in the paper).
        name: optional str.

    Example:

    >>> from kerasbert.optimizers import InverseSquareRootSchedule
    >>> schedule = InverseSquareRootSchedule(hidden_dim=512, warmup_steps=4000)
    >>> peak = float(schedule(3999))                         # update 4000: the end of warm-up
    >>> round(peak, 7), round(float(schedule(15999)) / peak, 3)   # then 1 / sqrt(n)
    (0.0006988, 0.5)
    """

    def __init__(self, hidden_dim, warmup_steps=4000, scale=1.0, name=None):
        super().__init__()
        if int(hidden_dim) <= 0:
            raise ValueError(f"hidden_dim must be > 0, got {hidden_dim!r}.")
        if warmup_steps is None or int(warmup_steps) <= 0:
            raise ValueError(f"warmup_steps must be > 0, got {warmup_steps!r}.")
        self.hidden_dim = int(hidden_dim)
        self.warmup_steps = int(warmup_steps)
        self.scale = float(scale)
        self.name = name

    def __call__(self, step):
        n = ops.cast(step, "float32") + 1.0
        factor = self.scale * self.hidden_dim ** -0.5
        return factor * ops.minimum(ops.rsqrt(n), n * self.warmup_steps ** -1.5)

    def get_config(self):
        return {"hidden_dim": self.hidden_dim, "warmup_steps": self.warmup_steps,
                "scale": self.scale, "name": self.name}
