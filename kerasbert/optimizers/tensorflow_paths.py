"""The TensorFlow-only parts of the BERT optimizers, in one place behind one
switch (`active()`).

Keras 3's optimizers are backend-neutral; under the TensorFlow backend five
things need TensorFlow's own API, for correctness (1-3) or speed (4-5):

1. An embedding's `IndexedSlices` gradient is summed over repeated ids
   before it is used (`deduplicate_gradient`): Keras 3 squares the raw
   slices, so Adam's second moment and the global norm are wrong for any
   token that occurs twice in a batch (always true of segment ids); the
   cross-replica sum concatenates slices, so it is done again after it.
2. Under `tf.distribute` with several replicas, the global-norm clip factor
   comes from the all-reduced gradient, so N replicas clip exactly as one
   device with the same global batch.
3. Gradient accumulation under `tf.distribute` (Keras' fails there: a
   `merge_call` inside its `cond`): every micro-step's gradients are
   all-reduced and accumulated in the cross-replica context, and every K-th
   micro-step their mean is applied.
4. The Adam step as one `ResourceApplyAdam` kernel.
5. The global norm from one `L2Loss` per gradient, an embedding's from its
   deduplicated rows, which are scaled as rows: Keras densifies the
   [V, H] gradient twice and reads it three times to clip it.

`TensorFlowOptimizerPaths` is a mixin of `BertOptimizerMixin`; each of its
overrides runs only when `active()`: the TensorFlow backend, unless
`KERASBERT_TF_OPTIMIZER_PATHS=0` is set, which runs Keras' own code instead
(to bisect a problem; 1-3 are then Keras' behaviour, right on one device).
"""

import os

import keras


def active():
    """The switch: the TensorFlow backend, and not turned off by
    KERASBERT_TF_OPTIMIZER_PATHS=0."""
    return (keras.config.backend() == "tensorflow"
            and os.environ.get("KERASBERT_TF_OPTIMIZER_PATHS", "1") != "0")


def _in_tf_replica_context():
    """True inside `strategy.run` of a (non-default) tf.distribute
    strategy under the TensorFlow backend."""
    if not active():
        return False
    import tensorflow as tf  # lazy: TensorFlow backend only

    return (
        tf.distribute.has_strategy()
        and tf.distribute.get_replica_context() is not None
    )


def _tf_variable(variable):
    return variable.value if isinstance(variable, keras.Variable) else variable


def _dense(gradient):
    import tensorflow as tf

    if isinstance(gradient, tf.IndexedSlices):
        return tf.convert_to_tensor(gradient)
    return gradient


def _scale_gradient(gradient, scale):
    import tensorflow as tf

    if gradient is None:
        return None
    if isinstance(gradient, tf.IndexedSlices):
        return tf.IndexedSlices(
            gradient.values * tf.cast(scale, gradient.values.dtype),
            gradient.indices,
            gradient.dense_shape,
        )
    return gradient * tf.cast(scale, gradient.dtype)


def _squared_norm(gradient):
    """sum(gradient ** 2) in float32, one pass (`L2Loss`). An embedding's
    `IndexedSlices` (deduplicated by `apply`) counts its rows only: Keras
    squares and sums the dense [V, H] table, zeros included, and densifies
    it again to scale it, four passes over 47 MB for MiniLM's vocabulary
    where the batch touched a few hundred rows."""
    import tensorflow as tf

    values = gradient.values if isinstance(gradient, tf.IndexedSlices) else gradient
    return 2.0 * tf.nn.l2_loss(tf.cast(values, tf.float32))


def deduplicate_gradient(gradient):
    """An embedding's `IndexedSlices` gradient with each row once (repeated
    ids summed), as TF's legacy optimizers did before a sparse update;
    other gradients (and None) are returned as they are.

    Keras 3 applies the raw slices: Adam's second moment then gets
    g1^2 + g2^2 instead of (g1 + g2)^2 for a token seen twice, and
    `tf.linalg.global_norm` / Keras's global norm square the raw slices
    too. `ReplicaContext.all_reduce(SUM)` of IndexedSlices concatenates
    the replicas' slices, so rows repeat again after it. TensorFlow only.
    """
    import tensorflow as tf

    if not isinstance(gradient, tf.IndexedSlices):
        return gradient
    unique, position = tf.unique(gradient.indices)
    values = tf.math.unsorted_segment_sum(
        gradient.values, position, tf.shape(unique)[0]
    )
    return tf.IndexedSlices(values, unique, gradient.dense_shape)


class TensorFlowOptimizerPaths:
    """Overrides of Keras optimizer internals that run under `active()`
    (module docstring); elsewhere each one is Keras' own."""

    def apply(self, grads, trainable_variables=None):
        if active():
            grads = [deduplicate_gradient(g) for g in grads]
        return super().apply(grads, trainable_variables)

    def _all_reduce_sum_gradients(self, grads_and_vars):
        # TF backend, under tf.distribute: the sum of IndexedSlices is the
        # concatenation of every replica's slices, so rows repeat again.
        reduced = super()._all_reduce_sum_gradients(grads_and_vars)
        if not active():
            return reduced
        return [(deduplicate_gradient(g), v) for g, v in reduced]

    # --- Clip by the global norm: all-reduced, and without densifying. ---

    def _clip_gradients(self, grads):
        if not self.global_clipnorm or not active():
            return super()._clip_gradients(grads)
        import tensorflow as tf

        present = [g for g in grads if g is not None]
        replica_context = tf.distribute.get_replica_context()
        if (
            replica_context is not None
            and replica_context.num_replicas_in_sync > 1
        ):
            summed = replica_context.all_reduce(
                tf.distribute.ReduceOp.SUM, [_dense(g) for g in present]
            )
            norm = tf.linalg.global_norm(summed)
        else:
            norm = tf.sqrt(tf.add_n([_squared_norm(g) for g in present]))
        clip = tf.cast(self.global_clipnorm, norm.dtype)
        # As keras's clip_by_global_norm: NaN if the norm is not finite, so
        # the bad step is visible instead of hidden.
        scale = clip * tf.minimum(1.0 / norm, 1.0 / clip)
        scale = scale + (norm - norm)
        return [_scale_gradient(g, scale) for g in grads]

    # --- Gradient accumulation under tf.distribute. ---

    def _backend_apply_gradients(self, grads, trainable_variables):
        if self.gradient_accumulation_steps and _in_tf_replica_context():  # implies active()
            import tensorflow as tf

            if self.use_ema:
                raise ValueError(
                    "use_ema with gradient accumulation under a "
                    "tf.distribute strategy is not supported."
                )
            # Keras runs `ops.cond(update?, apply, accumulate)` here, with
            # `merge_call`s inside both branches: MirroredStrategy rejects
            # that ("merge_call called while defining a new graph").
            # Cross to the cross-replica context once, outside any cond.
            tf.distribute.get_replica_context().merge_call(
                self._distributed_accumulate_and_apply,
                args=(list(grads), list(trainable_variables)),
            )
            return
        return super()._backend_apply_gradients(grads, trainable_variables)

    def _distributed_accumulate_and_apply(self, distribution, grads, variables):
        """Cross-replica: all-reduce this micro-step's gradients (so the
        accumulators stay identical on every replica, as mirrored variables
        must), add them to the accumulators, and every K-th micro-step
        apply their mean (clipped by its global norm) and reset them."""
        import tensorflow as tf

        steps = self.gradient_accumulation_steps
        variables = [_tf_variable(v) for v in variables]
        accumulators = [
            _tf_variable(
                self._accumulated_gradients[self._get_variable_index(v)]
            )
            for v in variables
        ]
        reduced = distribution.extended.batch_reduce_to(
            tf.distribute.ReduceOp.SUM,
            [(_dense(g), v) for g, v in zip(grads, variables)],
        )
        for value, accumulator in zip(reduced, accumulators):
            distribution.extended.update(
                accumulator,
                lambda acc, g: acc.assign_add(tf.cast(g, acc.dtype)),
                args=(value,),
                group=False,
            )
        is_update_step = tf.equal((self._iterations + 1) % steps, 0)

        def apply():
            scale = tf.constant(1.0)
            if self.global_clipnorm:
                norm = tf.linalg.global_norm(
                    [tf.cast(a.read_value(), "float32") for a in accumulators]
                ) / float(steps)
                clip = float(self.global_clipnorm)
                scale = clip * tf.minimum(1.0 / norm, 1.0 / clip)
                scale = scale + (norm - norm)
            learning_rate = self.learning_rate

            def update(variable, accumulator):
                grad = accumulator / steps * tf.cast(scale, accumulator.dtype)
                if self.clipnorm:
                    grad = self._clip_by_norm(grad)
                if self.clipvalue:
                    grad = tf.clip_by_value(
                        grad, -self.clipvalue, self.clipvalue
                    )
                self.update_step(grad, variable, learning_rate)
                return accumulator.assign(tf.zeros_like(accumulator))

            ops_ = [
                distribution.extended.update(
                    variable, update, args=(accumulator,), group=True
                )
                for variable, accumulator in zip(variables, accumulators)
            ]
            with tf.control_dependencies(ops_):
                return tf.constant(True)

        tf.cond(is_update_step, apply, lambda: tf.constant(False))

    def _fused_adam_update(self, gradient, variable, lr):
        """The Adam step as one `ResourceApplyAdam` kernel (TensorFlow
        backend, float32 variables, no amsgrad); returns False where it
        does not apply, and Keras' update runs instead.

        Same formula as `keras.optimizers.Adam` (the bias corrections
        folded into the step size, epsilon added to sqrt(v)), but one pass
        over the variable, its two moments and the gradient instead of
        about ten elementwise ops that each read and write whole tensors:
        on a CPU without XLA that was ~10% of a bert_mini pretraining step,
        most of it the 30522 x 256 token embedding. Under XLA the kernel
        lowers to the same fused loop XLA would build."""
        if not active() or getattr(self, "amsgrad", True):
            return False
        import tensorflow as tf

        tf_variable = _tf_variable(variable)
        if tf_variable.dtype != tf.float32:
            return False
        index = self._get_variable_index(variable)
        m = _tf_variable(self._momentums[index])
        v = _tf_variable(self._velocities[index])
        step = tf.cast(self.iterations + 1, tf.float32)
        beta_1 = tf.constant(self.beta_1, tf.float32)
        beta_2 = tf.constant(self.beta_2, tf.float32)
        tf.raw_ops.ResourceApplyAdam(
            var=tf_variable.handle,
            m=m.handle,
            v=v.handle,
            beta1_power=tf.pow(beta_1, step),
            beta2_power=tf.pow(beta_2, step),
            lr=tf.cast(lr, tf.float32),
            beta1=beta_1,
            beta2=beta_2,
            epsilon=tf.constant(self.epsilon, tf.float32),
            grad=tf.cast(_dense(gradient), tf.float32),
            use_locking=False,
        )
        return True
