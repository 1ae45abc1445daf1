"""`create_optimizer`: the BERT optimizer recipe in one call."""

from kerasbert.optimizers.bert_optimizers import DEFAULT_WEIGHT_DECAY_EXCLUSIONS
from kerasbert.optimizers.bert_optimizers import AdamW
from kerasbert.optimizers.bert_optimizers import Lamb
from kerasbert.optimizers.schedules import WarmupDecaySchedule

OPTIMIZERS = {"adamw": AdamW, "lamb": Lamb}


def create_optimizer(
    learning_rate,
    *,
    num_train_steps,
    warmup_steps=0,
    optimizer="adamw",
    weight_decay=0.01,
    end_learning_rate=0.0,
    power=1.0,
    clipnorm=1.0,
    accumulation_steps=1,
    beta_1=0.9,
    beta_2=0.999,
    epsilon=1e-6,
    layer_decay=None,
    num_layers=None,
    exclude_from_weight_decay=DEFAULT_WEIGHT_DECAY_EXCLUSIONS,
):
    """Builds the optimizer of the BERT recipe (DESIGN.md §4).

    AdamW (or LAMB for large batches) with decoupled weight decay that skips
    LayerNorm and bias variables, a linear warm-up then polynomial (linear
    by default) decay schedule, clipping by the *global* gradient norm, and
    optionally gradient accumulation and layer-wise learning-rate decay.

    Args:
        learning_rate: float. Peak learning rate.
        num_train_steps: int. Total optimizer updates of the run; the decay
            ends there. With gradient accumulation count updates, not
            batches (batches = num_train_steps * accumulation_steps).
        warmup_steps: int. Updates of linear warm-up (BERT: 10,000 of
            1,000,000 for pretraining, 10% for fine-tuning).
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

    Returns:
        a `kerasbert.optimizers.AdamW` or `kerasbert.optimizers.Lamb`.
    """
    key = str(optimizer).lower()
    if key not in OPTIMIZERS:
        raise ValueError(
            f"Unknown optimizer {optimizer!r}; expected one of "
            f"{sorted(OPTIMIZERS)}."
        )
    accumulation_steps = int(accumulation_steps)
    if accumulation_steps < 1:
        raise ValueError(
            f"accumulation_steps must be >= 1, got {accumulation_steps}."
        )
    schedule = WarmupDecaySchedule(
        peak_learning_rate=learning_rate,
        warmup_steps=warmup_steps,
        decay_steps=num_train_steps,
        end_learning_rate=end_learning_rate,
        power=power,
    )
    return OPTIMIZERS[key](
        learning_rate=schedule,
        weight_decay=weight_decay,
        beta_1=beta_1,
        beta_2=beta_2,
        epsilon=epsilon,
        exclude_from_weight_decay=exclude_from_weight_decay,
        layer_decay=layer_decay,
        num_layers=num_layers,
        global_clipnorm=clipnorm,
        gradient_accumulation_steps=(
            accumulation_steps if accumulation_steps > 1 else None
        ),
    )
