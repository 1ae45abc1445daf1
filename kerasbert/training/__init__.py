"""Optimizers, schedules, strategies, the training loop, checkpoints."""
