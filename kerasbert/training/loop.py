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

The model must provide `loss_terms(features, outputs)` returning per-batch
float32 sums (see kerasbert.tasks.BertPretrainer): mlm_loss_sum,
mlm_weight_sum, mlm_correct_sum, sentence_loss_sum, sentence_count,
sentence_correct_sum.
"""

import keras
import tensorflow as tf

TERMS = ("mlm_loss_sum", "mlm_weight_sum", "mlm_correct_sum",
         "sentence_loss_sum", "sentence_count", "sentence_correct_sum")
_SUM = tf.distribute.ReduceOp.SUM


def summarize(sums):
    """Global per-step sums -> {"loss", "mlm_loss", "mlm_accuracy",
    "sentence_loss", "sentence_accuracy"} as Python floats."""
    w = max(float(sums["mlm_weight_sum"]), 1e-12)
    out = {"mlm_loss": float(sums["mlm_loss_sum"]) / w,
           "mlm_accuracy": float(sums["mlm_correct_sum"]) / w}
    n = float(sums["sentence_count"])
    if n > 0:
        out["sentence_loss"] = float(sums["sentence_loss_sum"]) / n
        out["sentence_accuracy"] = float(sums["sentence_correct_sum"]) / n
    out["loss"] = out["mlm_loss"] + out.get("sentence_loss", 0.0)
    return out


def _is_loss_scaled(optimizer):
    return isinstance(optimizer, keras.optimizers.LossScaleOptimizer)


class TrainStep:
    """Builds the distributed `step(iterator)` function.

    Args:
        strategy: any `tf.distribute.Strategy` (the model and optimizer were
            built in its scope).
        model: a Keras model with `loss_terms` (see module doc).
        optimizer: a Keras optimizer WITHOUT its own clipnorm/global_clipnorm
            and without gradient_accumulation_steps (both happen here).
        accumulation_steps: micro-batches per optimizer step.
        clipnorm: global-norm clip of the summed gradient (None: off).
        jit_compile: XLA-compile the forward/backward pass of each
            micro-batch (the all-reduce and optimizer update stay outside,
            so it works under every strategy).
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
        self.step = tf.function(self._step)

    # --- per replica ------------------------------------------------------

    def _loss_and_grads(self, features, normalizers):
        weight_total, sequence_total = normalizers
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            outputs = self.model(features, training=True)
            terms = self.model.loss_terms(features, outputs)
            loss = terms["mlm_loss_sum"] / tf.maximum(weight_total, 1e-12)
            loss += terms["sentence_loss_sum"] / tf.maximum(sequence_total, 1.0)
            if self.model.losses:  # regularisers: averaged over all micro-batches
                loss += tf.add_n(self.model.losses) / (self.accumulation_steps * self.num_replicas)
            if _is_loss_scaled(self.optimizer):
                loss = self.optimizer.scale_loss(loss)
        grads = tape.gradient(loss, variables)
        # Dense gradients: converting an embedding's IndexedSlices sums the
        # rows of repeated ids, so the all-reduce, the global norm and the
        # optimizer never see duplicated rows.
        grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                 for g, v in zip(grads, variables)]
        return grads, terms

    def _replica_step(self, micro_batches):
        ctx = tf.distribute.get_replica_context()
        # Global normalisers come from the data alone, before any forward pass.
        local = tf.stack([
            tf.add_n([tf.reduce_sum(b["masked_lm_weights"]) for b in micro_batches]),
            tf.add_n([tf.cast(tf.shape(b["input_word_ids"])[0], tf.float32)
                      for b in micro_batches]),
        ])
        totals = ctx.all_reduce(_SUM, local)
        normalizers = (totals[0], totals[1])

        grads, sums = None, {k: tf.constant(0.0) for k in TERMS}
        for batch in micro_batches:
            g, terms = self._grad_fn(batch, normalizers)
            grads = g if grads is None else [a + b for a, b in zip(grads, g)]
            for key in TERMS:
                if key in terms:
                    sums[key] += tf.cast(terms[key], tf.float32)

        grads = ctx.all_reduce(_SUM, grads)
        scale = self.optimizer.dynamic_scale if _is_loss_scaled(self.optimizer) else None
        if scale is not None:
            grads = [g / tf.cast(scale, g.dtype) for g in grads]
        grad_norm = tf.linalg.global_norm(grads)
        if self.clipnorm:
            grads, _ = tf.clip_by_global_norm(grads, self.clipnorm, use_norm=grad_norm)
        # The optimizer sums gradients over replicas again (Keras 3 TF backend)
        # and a LossScaleOptimizer unscales them: undo both in advance.
        factor = 1.0 / self.num_replicas
        grads = [g * factor for g in grads]
        if scale is not None:
            grads = [g * tf.cast(scale, g.dtype) for g in grads]
        self.optimizer.apply(grads, self.model.trainable_variables)
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
        per_replica = self.strategy.run(self._replica_step, args=(micro_batches,))
        return {k: self.strategy.reduce(_SUM, v, axis=None) for k, v in per_replica.items()}
