"""`PretrainingTask`: the base of every model that computes its own loss
from the feature dict: BertPretrainer, ElectraPretrainer, CausalLM and
Distiller. One place for what they share: `model.fit` support built on the
training-loop protocol (kerasbert.training.loop), the global-batch loss
under a `tf.distribute` strategy, and the optimizer setup (`compile`).
"""

import keras
from keras import ops

from kerasbert.optimizers.bert_optimizers import AdamW
from kerasbert.tasks.backbone_model import BackboneModel


def num_replicas():
    """Replicas in sync under a `tf.distribute` strategy (1 elsewhere)."""
    if keras.config.backend() != "tensorflow":
        return 1
    import tensorflow as tf  # lazy: only the TensorFlow backend has strategies

    return tf.distribute.get_strategy().num_replicas_in_sync


def cross_replica_sum(value):
    """Sum of `value` over the replicas when called inside `strategy.run`
    with several replicas in sync; `value` itself otherwise."""
    if keras.config.backend() != "tensorflow":
        return value
    import tensorflow as tf  # lazy: only the TensorFlow backend has strategies

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return value
    return context.all_reduce("sum", value)


class PretrainingTask(BackboneModel):
    """What every task with its own loss shares: `model.fit` support built
    on the training-loop protocol (kerasbert.training.loop), and its
    optimizer setup (`compile(optimizer="auto")` at `default_learning_rate`).

    A subclass provides `_elementwise(features, outputs)` (dict of
    per-element float32 tensors), `_sums(elementwise)` (the protocol's
    `loss_terms`), `loss_normalizers(features)`, `combine_loss_terms(terms,
    normalizers)` and `_update_metrics(elementwise)` (its Keras metrics).
    """

    #: Learning rate of `compile(optimizer="auto")`.
    default_learning_rate = 1e-4

    def loss_terms(self, features, outputs):
        """Per-batch float32 SUMS (the training-loop protocol)."""
        return self._sums(self._elementwise(features, outputs))

    def _update_metrics(self, elementwise):
        """Updates the task's Keras metrics from `_elementwise`'s tensors."""
        raise NotImplementedError(f"{type(self).__name__} must define _update_metrics().")

    def _extra_losses(self):
        """Losses added by layers (`add_loss`) that join the task's loss."""
        return self.losses

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        """Keras 3 hook used by `fit`/`evaluate`: labels come from `x` (or a
        dict `y`); `sample_weight` is not used (the task weighs its own
        terms). Also updates the task's metrics.

        Returns this replica's share of the global loss: under a strategy
        with R replicas the denominators (`loss_normalizers`) are
        all-reduced, so the R returned values sum to the global-batch loss
        and their gradients sum (as Keras' all-reduce does) to the
        global-batch gradient."""
        del sample_weight, training
        features = dict(x)
        if isinstance(y, dict):
            features.update(y)
        if y_pred is None:
            y_pred = self(x, training=False)
        e = self._elementwise(features, y_pred)
        terms = self._sums(e)
        normalizers = {
            key: ops.stop_gradient(cross_replica_sum(ops.cast(value, "float32")))
            for key, value in self.loss_normalizers(features).items()
        }
        loss = self.combine_loss_terms(terms, normalizers)
        extra_losses = self._extra_losses()
        if extra_losses:
            extra = ops.sum([ops.cast(ops.sum(v), "float32") for v in extra_losses])
            loss = loss + extra / num_replicas()
        # Metrics: Mean states sum across replicas on read, so weighted
        # per-element updates give the exact global values.
        self._update_metrics(e)
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        # The task metrics were updated with the loss (compute_loss), which
        # already holds the per-position values; only report here.
        del x, y, y_pred, sample_weight
        return self.get_metrics_result()

    # --- training setup -----------------------------------------------------

    def compile(self, optimizer="auto", loss=None, **kwargs):
        """`optimizer="auto"`: AdamW (learning rate `default_learning_rate`,
        weight decay 0.01 not applied to LayerNorm and bias variables,
        epsilon 1e-6, global-norm clipping 1.0). Other arguments as
        `keras.Model.compile`; `loss` must stay None (the task computes its
        own)."""
        if loss is not None:
            raise ValueError(
                f"{type(self).__name__} computes its own loss from the feature "
                f"dict; do not pass `loss` to compile (got {loss!r})."
            )
        if isinstance(optimizer, str) and optimizer == "auto":
            # Ours, not keras.optimizers.AdamW: it clips the global norm of the
            # gradient summed over replicas (Keras clips each replica's share)
            # and matches the no-decay names on the variable's own name.
            optimizer = AdamW(learning_rate=self.default_learning_rate, weight_decay=0.01,
                              epsilon=1e-6, global_clipnorm=1.0)
        super().compile(optimizer=optimizer, **kwargs)

    def get_compile_config(self):
        config = super().get_compile_config()
        optimizer = getattr(self, "optimizer", None)
        optimizer = getattr(optimizer, "inner_optimizer", optimizer)
        pattern = getattr(optimizer, "_exclude_from_weight_decay_pattern", None)
        if config and pattern is not None:
            # Optimizer configs do not record the exclusions; keep them.
            config["exclude_from_weight_decay"] = pattern.pattern.split("|")
        return config

    def compile_from_config(self, config):
        """Recompiles a loaded model, with the weight-decay exclusions a
        Keras optimizer's config does not record (get_compile_config)."""
        config = dict(config)
        exclude = config.pop("exclude_from_weight_decay", None)
        config.pop("loss", None)
        config = keras.saving.deserialize_keras_object(config)
        if exclude and config.get("optimizer") is not None:  # before it is built
            config["optimizer"].exclude_from_weight_decay(var_names=sorted(exclude))
        self._recompile(config)
