"""`OptimizerOptions`: every argument of the BERT optimizer recipe in one
frozen object, stated once. `create_optimizer` (pretraining, distillation),
`fine_tuning_optimizer` and `Task.compile` all build their optimizer from
it, so a new option is added here and nowhere else.
"""

import dataclasses

from kerasbert.optimizers.bert_optimizers import DEFAULT_WEIGHT_DECAY_EXCLUSIONS
from kerasbert.optimizers.bert_optimizers import AdamW
from kerasbert.optimizers.bert_optimizers import Lamb
from kerasbert.optimizers.schedules import WarmupDecaySchedule

OPTIMIZERS = {"adamw": AdamW, "lamb": Lamb}


@dataclasses.dataclass(frozen=True)
class OptimizerOptions:
    """The optimizer of the BERT recipe (DESIGN.md §4), as data.

    AdamW (or LAMB for large batches) with decoupled weight decay that
    skips LayerNorm and bias variables, a linear warm-up then polynomial
    (linear by default) decay schedule, clipping by the *global* gradient
    norm, and optionally gradient accumulation and layer-wise
    learning-rate decay. The defaults are BERT fine-tuning's;
    `Task.compile(optimizer=options)` takes one as it is.

    Attributes:
        learning_rate: float. Peak learning rate (2e-5).
        num_train_steps: int or None. Total optimizer updates of the run;
            the decay ends there (with gradient accumulation, updates, not
            batches). None: the total is unknown, so the rate holds at
            `learning_rate` after the warm-up.
        warmup_steps: int or None. Updates of linear warm-up; None:
            `warmup_ratio * num_train_steps`, rounded (0 without a total).
        warmup_ratio: float in [0, 1]. Warm-up share of `num_train_steps`
            when `warmup_steps` is None (0.1).
        optimizer: "adamw" or "lamb".
        weight_decay: float (0.01 in BERT).
        end_learning_rate: float. Rate reached at num_train_steps.
        power: float. 1.0 = linear decay.
        clipnorm: float or None. Clip by global norm (1.0 in BERT).
        accumulation_steps: int >= 1. Batches averaged into one update
            (Keras's `gradient_accumulation_steps`); `optimizer.iterations`
            counts updates.
        beta_1, beta_2, epsilon: Adam / LAMB moments (BERT: 0.9, 0.999,
            1e-6).
        layer_decay: float in (0, 1] or None. Layer-wise learning-rate
            decay (fine-tuning; ELECTRA uses 0.8 for Base).
        num_layers: int or None. Encoder layers for layer_decay; None infers
            it from the variable paths (`transformer_layer_<i>`).
        exclude_from_weight_decay: regex patterns searched in each
            variable's own name.

    Example:

    >>> from kerasbert.optimizers import OptimizerOptions
    >>> options = OptimizerOptions(learning_rate=3e-5, num_train_steps=1000)
    >>> options.schedule().warmup_steps                      # 10% of the updates
    100
    >>> optimizer = options.build()                          # AdamW on that schedule
    >>> type(optimizer).__name__, optimizer.global_clipnorm
    ('AdamW', 1.0)
    """

    learning_rate: float = 2e-5
    num_train_steps: int = None
    warmup_steps: int = None
    warmup_ratio: float = 0.1
    optimizer: str = "adamw"
    weight_decay: float = 0.01
    end_learning_rate: float = 0.0
    power: float = 1.0
    clipnorm: float = 1.0
    accumulation_steps: int = 1
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-6
    layer_decay: float = None
    num_layers: int = None
    exclude_from_weight_decay: tuple = DEFAULT_WEIGHT_DECAY_EXCLUSIONS

    def __post_init__(self):
        # Refused when the options are made, before any variable exists.
        if str(self.optimizer).lower() not in OPTIMIZERS:
            raise ValueError(f"Unknown optimizer {self.optimizer!r}; expected one of "
                             f"{sorted(OPTIMIZERS)}.")
        if int(self.accumulation_steps) < 1:
            raise ValueError(f"accumulation_steps must be >= 1, got {self.accumulation_steps}.")

    @classmethod
    def split(cls, keywords, base=None):
        """(`base`, or the defaults, with the fields `keywords` names; the
        other keywords): how `Task.compile` tells its optimizer arguments
        from Keras's."""
        names = {field.name for field in dataclasses.fields(cls)}
        own = {k: v for k, v in keywords.items() if k in names}
        options = dataclasses.replace(base, **own) if base is not None else cls(**own)
        return options, {k: v for k, v in keywords.items() if k not in names}

    def schedule(self):
        """The `WarmupDecaySchedule`: warm-up, then decay to
        `end_learning_rate` at `num_train_steps`; without a total, warm-up
        (when `warmup_steps` asks) then the peak held (the schedule's decay
        ends at the warm-up and decays to the peak itself)."""
        if self.num_train_steps is None:
            warmup = int(self.warmup_steps or 0)
            return WarmupDecaySchedule(self.learning_rate, warmup, max(warmup, 1),
                                       end_learning_rate=self.learning_rate, power=self.power)
        total = int(self.num_train_steps)
        if total <= 0:
            raise ValueError(f"num_train_steps must be a positive number of optimizer "
                             f"updates, got {total}.")
        warmup = self.warmup_steps
        if warmup is None:
            if not 0.0 <= float(self.warmup_ratio) <= 1.0:
                raise ValueError(f"warmup_ratio must be in [0, 1], got {self.warmup_ratio!r}.")
            warmup = int(round(float(self.warmup_ratio) * total))
        return WarmupDecaySchedule(self.learning_rate, int(warmup), total,
                                   end_learning_rate=self.end_learning_rate, power=self.power)

    def build(self):
        """A `kerasbert.optimizers.AdamW` or `Lamb` on `schedule()`."""
        accumulation_steps = int(self.accumulation_steps)
        return OPTIMIZERS[str(self.optimizer).lower()](
            learning_rate=self.schedule(),
            weight_decay=self.weight_decay,
            beta_1=self.beta_1,
            beta_2=self.beta_2,
            epsilon=self.epsilon,
            exclude_from_weight_decay=self.exclude_from_weight_decay,
            layer_decay=self.layer_decay,
            num_layers=self.num_layers,
            global_clipnorm=self.clipnorm,
            gradient_accumulation_steps=accumulation_steps if accumulation_steps > 1 else None,
        )
