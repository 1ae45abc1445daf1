"""A custom training step for any `tf.distribute` strategy.

Why not `model.fit`: Keras 3 `fit` cannot drive MultiWorkerMirroredStrategy
(DESIGN §6), clips gradients per replica before they are summed (so
`global_clipnorm` sees 1/N of the real gradient under Mirrored), and cannot
checkpoint its input iterator (needed for step-exact resume). This step does
the same work for every strategy, one code path:

1. The host iterator yields this worker's share of the global batch; every
   local replica gets a contiguous slice of it. The iterator is a plain
   `tf.data` iterator, so `tf.train.Checkpoint` saves its position.
2. With `accumulation_steps` K, each optimizer step consumes K such batches.
   The loss is normalised by GLOBAL counts (masked-LM weights and sequences
   summed over replicas and micro-batches before the forward pass), so the
   gradients summed over replicas and micro-batches are exactly those of one
   big batch of K * global_batch_size sequences.
3. Gradients are all-reduced, unscaled (mixed_float16 loss scaling), clipped
   by their global norm, then handed to the optimizer.

The model is any pretraining task with this protocol (BertPretrainer is the
reference; ELECTRA's and the causal LM's follow it too):

    loss_normalizers(features) -> {name: float32 scalar}
        denominators known from the data alone (e.g. the masked-LM weight
        sum, the number of sequences); the loop sums them over micro-batches
        and replicas BEFORE the forward pass.
    loss_terms(features, outputs) -> {name: float32 scalar}
        per-batch SUMS (losses, hits, counts); summing them over replicas
        and micro-batches is exact.
    combine_loss_terms(terms, normalizers) -> float32 scalar
        the loss; with global normalizers, the gradients of the per-batch
        losses sum to the gradient of one big batch.
    summarize_terms(sums) -> {metric: float}
        Python metrics (must include "loss") from the global step sums.
    progress_metrics: {short label: metric name} for the progress bar.
"""

import contextlib
import re
import sys

import keras
import tensorflow as tf

from kerasbert.data import integrity
from kerasbert.errors import UsageError

_SUM = tf.distribute.ReduceOp.SUM


def progress_verbosity(progress=True):
    """How a run shows its progress, as Keras' `verbose` counts (the one
    place every run decides it): 0 nothing; 1 a bar redrawn in place at
    every step, on a terminal; 2 one line per epoch (`pretrain`: per logged
    step) when stdout is a file or a pipe. Keras alone would redraw the bar
    into a log file (its Progbar takes every POSIX stdout for a terminal):
    hundreds of carriage-return lines an epoch."""
    if not progress:
        return 0
    isatty = getattr(sys.stdout, "isatty", None)
    return 1 if isatty is not None and isatty() else 2


@contextlib.contextmanager
def data_errors_as_usage_errors(prefix=""):
    """Turns a bad-data error met while iterating a checked dataset (the
    reader's CorruptRecordError, or EmptyDataError, which reach the loop
    wrapped in a tf.errors.OpError, e.g. an InvalidArgumentError from a
    py_function or an Assert) into a one-line UsageError, `FILE record N:
    cause`, so the command line prints it without a traceback; so is a data
    file that vanished or became unreadable during the run (NotFound,
    PermissionDenied). Any other error passes through unchanged."""
    try:
        yield
    except (tf.errors.NotFoundError, tf.errors.PermissionDeniedError) as err:
        # The reader opens each file at every pass: one that vanished or
        # became unreadable since the run started.
        text = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", str(err).strip())
        text = re.sub(r"\s*\[Op:[^\]]*\].*", "", text.splitlines()[0] if text else "")
        raise UsageError(f"{prefix}a data file cannot be read any more: {text}") from None
    except tf.errors.OpError as err:
        problem = integrity.data_error(err)
        if problem is None:
            raise
        raise UsageError(prefix + problem.user_message()) from None


def _is_loss_scaled(optimizer):
    return isinstance(optimizer, keras.optimizers.LossScaleOptimizer)


class TrainStep:
    """Builds the distributed `step(iterator)` function.

    Args:
        strategy: any `tf.distribute.Strategy` (the model and optimizer were
            built in its scope).
        model: a pretraining task model with the module doc's protocol.
        optimizer: a Keras optimizer WITHOUT its own clipnorm/global_clipnorm
            and without gradient_accumulation_steps (both happen here).
        accumulation_steps: micro-batches per optimizer step.
        clipnorm: global-norm clip of the summed gradient (None: off).
        jit_compile: XLA-compile the forward/backward pass of each
            micro-batch; with one replica the whole step (clipping and the
            optimizer update too), with several the all-reduce and the
            update stay outside XLA, so it works under every strategy.

    Example:

    >>> import numpy as np
    >>> import tensorflow as tf
    >>> from kerasbert.models import BertBackbone
    >>> from kerasbert.optimizers import AdamW
    >>> from kerasbert.tasks import BertPretrainer
    >>> from kerasbert.training import TrainStep, resolve_strategy
    >>> batch = {"input_word_ids": np.array([[2, 5, 4, 3, 6, 4, 3]] * 2, "int32"),   # [B, T]
    ...          "input_mask": np.ones((2, 7), "int32"),
    ...          "input_type_ids": np.array([[0, 0, 0, 0, 1, 1, 1]] * 2, "int32"),
    ...          "masked_lm_positions": np.array([[2, 5]] * 2, "int32"),           # [B, P]
    ...          "masked_lm_ids": np.array([[7, 8]] * 2, "int32"),
    ...          "masked_lm_weights": np.ones((2, 2), "float32"),
    ...          "next_sentence_labels": np.array([[0], [1]], "int32")}
    >>> strategy = resolve_strategy("cpu")
    >>> with strategy.scope():
    ...     model = BertPretrainer(BertBackbone(vocabulary_size=10, num_layers=1, num_heads=2,
    ...                                         hidden_dim=8, intermediate_dim=16,
    ...                                         max_sequence_length=16))
    ...     _ = model(batch)
    ...     optimizer = AdamW(1e-3)
    ...     optimizer.build(model.trainable_variables)
    >>> train = TrainStep(strategy, model, optimizer, clipnorm=1.0)
    >>> sums = train.step(iter(tf.data.Dataset.from_tensors(batch).repeat()))
    >>> int(optimizer.iterations), sorted(model.summarize_terms(sums))
    (1, ['loss', 'mlm_accuracy', 'mlm_loss', 'sentence_accuracy', 'sentence_loss'])
    """

    def __init__(self, strategy, model, optimizer, *, accumulation_steps=1,
                 clipnorm=1.0, jit_compile=False):
        if accumulation_steps < 1:
            raise ValueError(f"accumulation_steps must be >= 1, got {accumulation_steps}.")
        self.strategy = strategy
        self.model = model
        self.optimizer = optimizer
        self.accumulation_steps = int(accumulation_steps)
        self.clipnorm = clipnorm
        self.num_replicas = strategy.num_replicas_in_sync
        self.num_local_replicas = len(strategy.extended.worker_devices)
        self._grad_fn = tf.function(self._loss_and_grads, jit_compile=jit_compile,
                                    reduce_retracing=True)
        # One replica: nothing crosses devices, so XLA can take the whole
        # replica step (forward, backward, clipping and the optimizer
        # update), as Keras' jit-compiled train step does. Several replicas
        # keep the all-reduce and the update outside XLA.
        self._replica_fn = self._replica_step
        if jit_compile and self.num_replicas == 1 and self.num_local_replicas == 1:
            self._replica_fn = tf.function(self._replica_step, jit_compile=True,
                                           reduce_retracing=True)
        self.step = tf.function(self._step)

    # --- per replica ------------------------------------------------------

    def _loss_and_grads(self, features, normalizers):
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = self.model(features, training=True)
            terms = self.model.loss_terms(features, outputs)
            loss = self.model.combine_loss_terms(terms, normalizers)
            if self.model.losses:  # regularisers: averaged over all micro-batches
                loss += tf.add_n(self.model.losses) / (self.accumulation_steps * self.num_replicas)
            if _is_loss_scaled(self.optimizer):
                loss = self.optimizer.scale_loss(loss)
        grads = tape.gradient(loss, variables)
        # Dense gradients: converting an embedding's IndexedSlices sums the
        # rows of repeated ids, so the all-reduce, the global norm and the
        # optimizer never see duplicated rows. None (a variable the loss
        # does not use, e.g. the pooler of an MLM-only run) stays None: that
        # variable is left alone, as `model.fit` leaves it.
        grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]
        return grads, terms

    def _replica_step(self, micro_batches):
        ctx = tf.distribute.get_replica_context()
        # Global normalisers come from the data alone, before any forward
        # pass: summed over micro-batches here, over replicas below.
        per_batch = [self.model.loss_normalizers(b) for b in micro_batches]
        names = sorted(per_batch[0])
        local = tf.stack([tf.add_n([tf.cast(n[k], tf.float32) for n in per_batch])
                          for k in names])
        totals = ctx.all_reduce(_SUM, local)
        normalizers = {k: totals[i] for i, k in enumerate(names)}

        grads, sums = None, {}
        for batch in micro_batches:
            g, terms = self._grad_fn(batch, normalizers)
            grads = g if grads is None else [
                None if a is None else a + b for a, b in zip(grads, g)]
            for key, value in terms.items():
                sums[key] = sums.get(key, 0.0) + tf.cast(value, tf.float32)

        # Which variables have a gradient is fixed by the graph, so it is
        # the same on every replica and every step.
        variables = [v for v, g in zip(self.model.trainable_variables, grads) if g is not None]
        grads = ctx.all_reduce(_SUM, [g for g in grads if g is not None])
        scale = self.optimizer.dynamic_scale if _is_loss_scaled(self.optimizer) else None
        if scale is not None:
            grads = [g / tf.cast(scale, g.dtype) for g in grads]
        grad_norm = tf.linalg.global_norm(grads)
        if self.clipnorm:
            grads, _ = tf.clip_by_global_norm(grads, self.clipnorm, use_norm=grad_norm)
        # The optimizer sums gradients over replicas again (Keras 3 TF backend)
        # and a LossScaleOptimizer unscales them: undo both in advance.
        if self.num_replicas > 1:
            grads = [g * (1.0 / self.num_replicas) for g in grads]
        if scale is not None:
            grads = [g * tf.cast(scale, g.dtype) for g in grads]
        self.optimizer.apply(grads, variables)
        sums["grad_norm"] = grad_norm / self.num_replicas  # summed over replicas below
        return sums

    # --- input ------------------------------------------------------------

    def _distribute(self, batch):
        """This worker's batch -> per-replica slices (contiguous)."""
        n = self.num_local_replicas
        if n == 1 and self.num_replicas == 1:
            return batch

        def slice_for(ctx):
            index = ctx.replica_id_in_sync_group % n
            return tf.nest.map_structure(
                lambda t: tf.split(t, n, axis=0)[index], batch)

        return self.strategy.experimental_distribute_values_from_function(slice_for)

    def _step(self, iterator):
        micro_batches = [self._distribute(next(iterator)) for _ in range(self.accumulation_steps)]
        per_replica = self.strategy.run(self._replica_fn, args=(micro_batches,))
        return {k: self.strategy.reduce(_SUM, v, axis=None) for k, v in per_replica.items()}
