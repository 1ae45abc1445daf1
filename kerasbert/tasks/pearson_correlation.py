"""A streaming Pearson correlation for regression training logs."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kerasbert")
class StreamingPearsonCorrelation(keras.metrics.Metric):
    """Pearson's r over everything seen since the last reset.

    `keras.metrics.PearsonCorrelation` averages per-batch correlations along
    an axis (for [B, 1] predictions that is a per-row value, meaningless for
    regression); this metric keeps the running sums n, Σx, Σy, Σx², Σy², Σxy
    (optionally weighted), so `result()` is the correlation over the whole
    epoch, the number STS-B reports. Sums are float32 (a training monitor;
    report final scores with `kerasbert.metrics`).

    Inputs: y_true [B] or [B, 1], y_pred [B] or [B, 1], sample_weight [B].

    Example:

    >>> from kerasbert.tasks import StreamingPearsonCorrelation
    >>> metric = StreamingPearsonCorrelation()
    >>> metric.update_state([1.0, 2.0], [1.0, 3.0])          # batch 1: y_true, y_pred
    >>> metric.update_state([3.0, 4.0], [2.0, 4.0])          # batch 2
    >>> round(float(metric.result()), 3)                     # r over all four pairs
    0.8
    """

    def __init__(self, name="pearson", dtype="float32"):
        super().__init__(name=name, dtype=dtype)
        self._names = ("n", "sx", "sy", "sxx", "syy", "sxy")
        for n in self._names:
            setattr(
                self,
                n,
                self.add_variable(shape=(), initializer="zeros", name=n, dtype=dtype),
            )

    def update_state(self, y_true, y_pred, sample_weight=None):
        x = ops.reshape(ops.cast(y_pred, self.dtype), (-1,))
        y = ops.reshape(ops.cast(y_true, self.dtype), (-1,))
        if sample_weight is None:
            w = ops.ones_like(x)
        else:
            w = ops.reshape(ops.cast(sample_weight, self.dtype), (-1,))
        self.n.assign_add(ops.sum(w))
        self.sx.assign_add(ops.sum(w * x))
        self.sy.assign_add(ops.sum(w * y))
        self.sxx.assign_add(ops.sum(w * x * x))
        self.syy.assign_add(ops.sum(w * y * y))
        self.sxy.assign_add(ops.sum(w * x * y))

    def result(self):
        n = ops.maximum(self.n, 1e-12)
        cov = self.sxy / n - (self.sx / n) * (self.sy / n)
        var_x = ops.maximum(self.sxx / n - ops.square(self.sx / n), 0.0)
        var_y = ops.maximum(self.syy / n - ops.square(self.sy / n), 0.0)
        return ops.divide_no_nan(cov, ops.sqrt(var_x * var_y))

    def reset_state(self):
        for n in self._names:
            getattr(self, n).assign(0.0)

    def get_config(self):
        return {"name": self.name, "dtype": self.dtype}
