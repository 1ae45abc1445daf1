"""`create_optimizer`: the BERT optimizer recipe in one call; its
arguments are `OptimizerOptions`' (kerasbert/optimizers/optimizer_options.py)."""

from kerasbert.optimizers.optimizer_options import OptimizerOptions


def create_optimizer(learning_rate, *, num_train_steps, warmup_steps=0, **options):
    """Builds the optimizer of the BERT recipe (DESIGN.md §4).

    Args:
        learning_rate: float. Peak learning rate.
        num_train_steps: int. Total optimizer updates of the run; the decay
            ends there. With gradient accumulation count updates, not
            batches (batches = num_train_steps * accumulation_steps).
        warmup_steps: int. Updates of linear warm-up (BERT: 10,000 of
            1,000,000 for pretraining, 10% for fine-tuning); 0 by default.
        **options: the other `OptimizerOptions` fields: optimizer ("adamw"
            or "lamb"), weight_decay, end_learning_rate, power, clipnorm,
            accumulation_steps, beta_1, beta_2, epsilon, layer_decay,
            num_layers, exclude_from_weight_decay (an unknown name is a
            TypeError).

    Returns:
        a `kerasbert.optimizers.AdamW` or `kerasbert.optimizers.Lamb`.
    """
    return OptimizerOptions(learning_rate=learning_rate, num_train_steps=num_train_steps,
                            warmup_steps=warmup_steps, **options).build()
