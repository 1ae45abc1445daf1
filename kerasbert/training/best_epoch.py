"""Keep the epoch with the best dev metric, not the last one.

Fine-tuning curves are noisy: on small datasets the last epoch is often not
the best, and dev loss is a poor proxy for the task's own metric (accuracy
keeps improving while the loss rises as the model grows confident). After
every epoch `BestEpoch` scores the model on the dev split with the task's
metric (accuracy, F1, MCC, Pearson/Spearman, SQuAD F1, entity F1), keeps a
copy of the weights whenever the score improves, can stop when it has not
improved for `patience` epochs, and puts the best weights back when
training ends.
"""

import math

import keras


class BestEpoch(keras.callbacks.Callback):
    """Scores each epoch on the dev split and restores the best one.

    Args:
        score: `() -> {metric: float}`, the task's metrics of the model on
            the dev split as it is now.
        metric: the key of `score()`'s result to select by (higher is
            better).
        patience: stop after this many epochs without improvement (None:
            never stop early).

    Attributes (after `fit`):
        scores: the selection metric per epoch (NaN counts as worst).
        best_epoch: 1-based epoch whose weights the model holds.
        best_metrics: `score()` of that epoch.
        stopped_early: whether `patience` ended training.

    The score goes into the epoch's logs as `dev_<metric>`, so `fit`'s
    history has it beside the loss.
    """

    def __init__(self, score, metric, patience=None):
        super().__init__()
        if patience is not None and patience < 1:
            raise ValueError(f"patience must be >= 1, got {patience}.")
        self.score, self.metric, self.patience = score, metric, patience

    def on_train_begin(self, logs=None):
        self.scores, self.best_epoch, self.best_metrics = [], None, None
        self.stopped_early = False
        self._best_weights = None

    def on_epoch_end(self, epoch, logs=None):
        metrics = self.score()
        if self.metric not in metrics:
            raise KeyError(f"The dev metrics have no {self.metric!r} (they have "
                           f"{', '.join(sorted(metrics))}).")
        value = float(metrics[self.metric])
        self.scores.append(value)
        if logs is not None:
            logs[f"dev_{self.metric}"] = value
        best = self.scores[self.best_epoch - 1] if self.best_epoch else -math.inf
        if not math.isnan(value) and value > best:
            self.best_epoch, self.best_metrics = epoch + 1, dict(metrics)
            # A copy in host memory: the next epoch's updates must not touch it.
            self._best_weights = [w.copy() for w in self.model.get_weights()]
        elif self.patience and self.best_epoch and epoch + 1 - self.best_epoch >= self.patience:
            self.model.stop_training = True
            self.stopped_early = True

    def on_train_end(self, logs=None):
        if self._best_weights is not None:
            self.model.set_weights(self._best_weights)
            self._best_weights = None

    def summary(self):
        """What metrics.json records about the selection."""
        return {"metric": self.metric, "kept_epoch": self.best_epoch,
                "epochs_run": len(self.scores), "stopped_early": self.stopped_early,
                "patience": self.patience,
                "per_epoch": [None if math.isnan(s) else s for s in self.scores]}
