"""AdamW and LAMB for BERT: weight-decay exclusions, LLRD, update counting.

Both are subclasses of the Keras 3 optimizers of the same name and add what
BERT training needs on top of them (see `BertOptimizerMixin`). Build them
directly, or with `kerasbert.optimizers.create_optimizer(...)`.
"""

import re

import keras
from keras import ops

from kerasbert.optimizers.layer_decay import infer_num_layers
from kerasbert.optimizers.layer_decay import layer_decay_multiplier
from kerasbert.optimizers.tensorflow_paths import TensorFlowOptimizerPaths

# Matched (regex search) against a variable's own name, the last component
# of its path: LayerNormalization's `gamma` / `beta`, Dense's `bias`, our
# MaskedLMHead's `output_bias`. `embeddings`, `kernel`, `decoder_kernel`
# are decayed.
DEFAULT_WEIGHT_DECAY_EXCLUSIONS = ("gamma", "beta", "bias")


def variable_name(variable):
    """The variable's own name, without layer scopes or a ":0" suffix.

    `keras.Variable.name` is already that; under the TensorFlow backend the
    optimizer also sees the underlying `tf.Variable`, whose name is the full
    path ("model/dense/bias:0")."""
    return re.sub(r":\d+$", "", variable.name).rsplit("/", 1)[-1]


def variable_path(variable):
    """`keras.Variable.path`, or a `tf.Variable`'s name without ":0"."""
    path = getattr(variable, "path", None)
    if path is None:
        path = re.sub(r":\d+$", "", variable.name)
    return path


class BertOptimizerMixin(TensorFlowOptimizerPaths):
    """What BERT training adds to a Keras 3 optimizer.

    1. Decoupled weight decay, `w -= lr * weight_decay * w`, skipped for
       variables whose own name matches a pattern in
       `exclude_from_weight_decay` (LayerNorm gamma/beta and biases by
       default). Keras's `exclude_from_weight_decay(var_names=...)` searches
       the *full* `tf.Variable` name under the TF backend
       ("pretrainer/bias_proj/kernel:0" would match "bias"), and the list is
       not part of the optimizer config; here the patterns see only the
       variable's own name, and they round-trip through `get_config`.
    2. Layer-wise learning-rate decay: with `layer_decay` set, the variable
       at encoder depth d trains with `lr * layer_decay ** (L + 1 - d)`
       (`kerasbert.optimizers.layer_decay`). The learning rate itself is
       scaled inside `update_step` (scaling gradients would do nothing:
       Adam is invariant to the gradient's scale), and so is the weight
       decay, which is proportional to that variable's learning rate.
    3. Learning-rate schedules see optimizer *updates*. Under gradient
       accumulation Keras calls the schedule with its micro-step counter
       (`optimizer._iterations`, one per `apply`), so a schedule written in
       training steps would run `gradient_accumulation_steps` times too
       fast; here it gets `optimizer.iterations` (= micro-steps // K), the
       same count that Adam's bias correction uses.
    4. Under the TensorFlow backend, exact sparse updates and clipping,
       gradient accumulation under `tf.distribute` and a fused Adam kernel
       (`kerasbert.optimizers.tensorflow_paths`, one file behind one
       switch).

    Args (keyword, in addition to the Keras optimizer's, whose defaults
    change to BERT's: weight_decay 0.01, epsilon 1e-6):
        exclude_from_weight_decay: sequence of regex patterns, searched in
            each variable's own name.
        layer_decay: float in (0, 1] or None (no LLRD).
        num_layers: int or None. Transformer layers of the encoder, for
            LLRD. None infers it from the variable paths at build time.

    Example:

    >>> from kerasbert.optimizers import AdamW, BertOptimizerMixin, Lamb
    >>> issubclass(AdamW, BertOptimizerMixin), issubclass(Lamb, BertOptimizerMixin)
    (True, True)
    >>> optimizer = AdamW(exclude_from_weight_decay=["norm", "bias"], layer_decay=0.8,
    ...                   num_layers=2)
    >>> config = optimizer.get_config()                      # the patterns round-trip
    >>> config["exclude_from_weight_decay"], config["layer_decay"], config["num_layers"]
    (['norm', 'bias'], 0.8, 2)
    >>> AdamW.from_config(config).get_config()["exclude_from_weight_decay"]
    ['norm', 'bias']
    """

    def __init__(self, learning_rate=0.001, *, weight_decay=0.01, epsilon=1e-6,
                 exclude_from_weight_decay=DEFAULT_WEIGHT_DECAY_EXCLUSIONS, layer_decay=None,
                 num_layers=None, **kwargs):
        super().__init__(learning_rate=learning_rate, weight_decay=weight_decay,
                         epsilon=epsilon, **kwargs)
        if layer_decay is not None and not 0.0 < float(layer_decay) <= 1.0:
            raise ValueError(
                f"layer_decay must be in (0, 1], got {layer_decay!r}."
            )
        if num_layers is not None and int(num_layers) < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers!r}.")
        self._weight_decay_exclusions = tuple(exclude_from_weight_decay or ())
        self.layer_decay = None if layer_decay is None else float(layer_decay)
        self.num_layers = None if num_layers is None else int(num_layers)
        self._variable_options = {}

    # --- Per-variable options, fixed when the optimizer is built. ---

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        num_layers = self.num_layers
        if self.layer_decay is not None and num_layers is None:
            num_layers = infer_num_layers(variable_path(v) for v in var_list)
            if num_layers is None:
                raise ValueError(
                    "layer_decay is set but no variable path names a "
                    "`transformer_layer_<i>`; pass num_layers explicitly. "
                    f"Paths: {[variable_path(v) for v in var_list][:8]}"
                )
        self._built_num_layers = num_layers
        for variable in var_list:
            self._variable_options[self._var_key(variable)] = (
                self._compute_variable_options(variable)
            )

    def _compute_variable_options(self, variable):
        name = variable_name(variable)
        decay = bool(self.weight_decay) and not any(
            re.search(pattern, name)
            for pattern in self._weight_decay_exclusions
        )
        # Keras's own mechanism too, so `exclude_from_weight_decay(...)`
        # calls (var_list or var_names) are honoured.
        decay = decay and self._use_weight_decay(variable)
        multiplier = 1.0
        if self.layer_decay is not None:
            multiplier = layer_decay_multiplier(
                variable_path(variable),
                getattr(self, "_built_num_layers", None) or self.num_layers,
                self.layer_decay,
            )
        return {"decay": decay, "lr_multiplier": multiplier, "name": name}

    def _options(self, variable):
        key = self._var_key(variable)
        options = self._variable_options.get(key)
        if options is None:
            options = self._compute_variable_options(variable)
            self._variable_options[key] = options
        return options

    def variable_learning_rate(self, variable, learning_rate):
        """`learning_rate` times the variable's LLRD multiplier."""
        lr = ops.cast(learning_rate, variable.dtype)
        multiplier = self._options(variable)["lr_multiplier"]
        return lr if multiplier == 1.0 else lr * multiplier

    def uses_weight_decay(self, variable):
        """Whether `variable` is weight-decayed."""
        return self._options(variable)["decay"]

    def _apply_weight_decay(self, variables):
        # Decay happens in `update_step`, with the variable's own (LLRD)
        # learning rate.
        return

    def _decay_variable(self, variable, lr):
        if self.uses_weight_decay(variable):
            wd = ops.cast(self.weight_decay, variable.dtype)
            self.assign_sub(variable, ops.multiply(variable, wd * lr))

    # --- Schedules count updates, not micro-steps. ---

    def _get_current_learning_rate(self):
        if isinstance(
            self._learning_rate,
            keras.optimizers.schedules.LearningRateSchedule,
        ):
            return self._learning_rate(self.iterations)
        return super()._get_current_learning_rate()

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "exclude_from_weight_decay": list(
                    self._weight_decay_exclusions
                ),
                "layer_decay": self.layer_decay,
                "num_layers": self.num_layers,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="kerasbert")
class AdamW(BertOptimizerMixin, keras.optimizers.AdamW):
    """Adam with decoupled weight decay (Loshchilov & Hutter), as BERT uses.

    `keras.optimizers.AdamW` plus `BertOptimizerMixin`: weight decay 0.01
    skips LayerNorm and bias variables, optional layer-wise learning-rate
    decay, schedules counted in updates. The update per variable is

        w -= lr_v * weight_decay * w          (if w is decayed)
        w -= lr_v * m_hat / (sqrt(v_hat) + epsilon)

    with `lr_v` the (LLRD-scaled) learning rate; as in Keras, epsilon is
    added to the bias-corrected sqrt(v) (BERT's TF1 code had no bias
    correction; Model Garden's AdamWeightDecay has it).

    Args:
        learning_rate: float or a `LearningRateSchedule`.
        weight_decay: float.
        beta_1, beta_2, epsilon: Adam's. BERT uses epsilon 1e-6.
        exclude_from_weight_decay, layer_decay, num_layers: see
            `BertOptimizerMixin`.
        **kwargs: `keras.optimizers.Optimizer` arguments (global_clipnorm,
            gradient_accumulation_steps, name, ...).

    Example:

    >>> import keras
    >>> import numpy as np
    >>> from kerasbert.optimizers import AdamW
    >>> dense = keras.layers.Dense(2, kernel_initializer="ones", bias_initializer="ones")
    >>> dense.build((None, 2))
    >>> optimizer = AdamW(learning_rate=0.1, weight_decay=0.5)
    >>> zeros = [np.zeros((2, 2), "float32"), np.zeros(2, "float32")]
    >>> optimizer.apply(zeros, [dense.kernel, dense.bias])   # zero gradients: only decay moves
    >>> [round(float(w), 4) for w in dense.kernel.numpy()[0]]   # 1 - 0.1 * 0.5 * 1
    [0.95, 0.95]
    >>> dense.bias.numpy().tolist()                          # biases are not decayed
    [1.0, 1.0]
    """

    def update_step(self, gradient, variable, learning_rate):
        lr = self.variable_learning_rate(variable, learning_rate)
        self._decay_variable(variable, lr)
        if not self._fused_adam_update(gradient, variable, lr):
            super().update_step(gradient, variable, lr)



@keras.saving.register_keras_serializable(package="kerasbert")
class Lamb(BertOptimizerMixin, keras.optimizers.Lamb):
    """LAMB (You et al. 2019), as in the paper and Model Garden's `lamb.py`.

    Per variable w with Adam moments m_hat, v_hat (bias-corrected):

        u = m_hat / (sqrt(v_hat) + epsilon) + weight_decay * w   (decay
            only if w is decayed: not LayerNorm / bias by default)
        r = ||w|| / ||u||   if w is adapted and both norms > 0, else 1
        w -= lr_v * r * u

    The weight decay is inside the trust ratio and LayerNorm / bias are
    excluded from both decay and layer adaptation, which
    `keras.optimizers.Lamb` does not do (its decay is applied outside the
    ratio, to every variable, and every variable is adapted).

    Args:
        learning_rate: float or a `LearningRateSchedule`.
        weight_decay: float.
        beta_1, beta_2, epsilon: Adam's (Model Garden: epsilon 1e-6).
        exclude_from_weight_decay: regex patterns (variable's own name).
        exclude_from_layer_adaptation: regex patterns, or None to use
            `exclude_from_weight_decay` (as Model Garden does).
        layer_decay, num_layers: see `BertOptimizerMixin`.
        **kwargs: `keras.optimizers.Optimizer` arguments.

    Example:

    >>> import keras
    >>> from kerasbert.optimizers import Lamb
    >>> kernel = keras.Variable([[1.0, 1.0], [1.0, 1.0]], name="kernel")
    >>> bias = keras.Variable([1.0, 1.0], name="bias")
    >>> optimizer = Lamb(learning_rate=0.1, weight_decay=0.5)
    >>> optimizer.apply([keras.ops.zeros((2, 2)), keras.ops.zeros(2)], [kernel, bias])
    >>> [round(float(w), 4) for w in kernel.numpy()[0]]      # ratio ||w|| / ||0.5 w|| = 2
    [0.9, 0.9]
    >>> bias.numpy().tolist()                                # neither decayed nor adapted
    [1.0, 1.0]
    """

    def __init__(self, *args, exclude_from_layer_adaptation=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._layer_adaptation_exclusions = (
            None
            if exclude_from_layer_adaptation is None
            else tuple(exclude_from_layer_adaptation)
        )

    def _compute_variable_options(self, variable):
        options = super()._compute_variable_options(variable)
        patterns = self._layer_adaptation_exclusions
        if patterns is None:
            patterns = self._weight_decay_exclusions
        options["adapt"] = not any(
            re.search(pattern, options["name"]) for pattern in patterns
        )
        return options

    def uses_layer_adaptation(self, variable):
        """Whether `variable`'s update is scaled by the trust ratio."""
        return self._options(variable)["adapt"]

    def update_step(self, gradient, variable, learning_rate):
        lr = self.variable_learning_rate(variable, learning_rate)
        gradient = ops.cast(gradient, variable.dtype)
        local_step = ops.cast(self.iterations + 1, variable.dtype)
        beta_1_power = ops.power(
            ops.cast(self.beta_1, variable.dtype), local_step
        )
        beta_2_power = ops.power(
            ops.cast(self.beta_2, variable.dtype), local_step
        )
        index = self._get_variable_index(variable)
        m = self._momentums[index]
        v = self._velocities[index]
        self.assign_add(
            m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1)
        )
        self.assign_add(
            v,
            ops.multiply(
                ops.subtract(ops.square(gradient), v), 1 - self.beta_2
            ),
        )
        m_hat = ops.divide(m, 1.0 - beta_1_power)
        v_hat = ops.divide(v, 1.0 - beta_2_power)
        update = ops.divide(m_hat, ops.add(ops.sqrt(v_hat), self.epsilon))
        if self.uses_weight_decay(variable):
            wd = ops.cast(self.weight_decay, variable.dtype)
            update = ops.add(update, ops.multiply(wd, variable))
        if self.uses_layer_adaptation(variable):
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            safe_u_norm = ops.where(ops.greater(u_norm, 0), u_norm, 1.0)
            ratio = ops.where(
                ops.logical_and(ops.greater(w_norm, 0), ops.greater(u_norm, 0)),
                w_norm / safe_u_norm,
                1.0,
            )
            update = ops.multiply(ratio, update)
        self.assign_sub(variable, ops.multiply(lr, update))

    def get_config(self):
        config = super().get_config()
        config["exclude_from_layer_adaptation"] = (
            None
            if self._layer_adaptation_exclusions is None
            else list(self._layer_adaptation_exclusions)
        )
        return config
