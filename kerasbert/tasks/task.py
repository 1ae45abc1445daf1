"""`Task`: the shared base of the fine-tuning models (backbone + a head).

A task model is a subclassed `keras.Model` that owns a backbone
(`kerasbert.models.Backbone`: inputs `input_word_ids`, `input_mask`,
`input_type_ids`, outputs `sequence_output`, `pooled_output`, ...), a
dropout and a small head. This module holds what every task shares:

- the dtype policy follows the backbone's (so `compile` wraps the optimizer
  in a `LossScaleOptimizer` under mixed_float16) and logits leave the head
  in float32;
- the backbone inputs are picked from the feature dict (other keys, such as
  labels, are ignored), cast to int32, with `input_type_ids` defaulting to
  zeros;
- `get_config` / `from_config` serialize the backbone with the task's own
  constructor arguments, so `.keras` files load in safe mode;
- `compile(optimizer="auto", ...)` builds the BERT fine-tuning optimizer
  (`kerasbert.optimizers.create_optimizer`: AdamW, weight decay 0.01 except
  LayerNorm and biases, linear warm-up, linear decay, global-norm clipping
  1.0, optional layer-wise learning-rate decay) and the task's default
  loss and metrics.
"""

import keras
from keras import ops

from kerasbert.optimizers.optimization import create_optimizer
from kerasbert.tasks.backbone_model import BackboneModel

BACKBONE_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")


def backbone_inputs(inputs):
    """The backbone's three int32 tensors from a feature dict.

    `input_word_ids` and `input_mask` are required; `input_type_ids`
    defaults to zeros (single-segment input). Other keys are ignored.
    """
    if not isinstance(inputs, dict):
        raise TypeError(
            "A task model takes a dict with `input_word_ids`, `input_mask` "
            f"and (optionally) `input_type_ids`; got {type(inputs).__name__}."
        )
    missing = [k for k in BACKBONE_INPUTS[:2] if k not in inputs]
    if missing:
        raise KeyError(
            f"Missing input(s) {', '.join(missing)}; got keys "
            f"{sorted(inputs)}. Expected {', '.join(BACKBONE_INPUTS)}."
        )
    features = {
        k: ops.cast(inputs[k], "int32") for k in BACKBONE_INPUTS if k in inputs
    }
    if "input_type_ids" not in features:
        features["input_type_ids"] = ops.zeros_like(features["input_word_ids"])
    return features


def head_initializer(backbone):
    """Truncated normal with the backbone's `initializer_range` (0.02)."""
    return keras.initializers.TruncatedNormal(
        stddev=getattr(backbone, "initializer_range", 0.02)
    )


def fine_tuning_optimizer(
    learning_rate=2e-5,
    num_train_steps=None,
    warmup_ratio=0.1,
    warmup_steps=None,
    weight_decay=0.01,
    layer_decay=None,
    **kwargs,
):
    """The BERT fine-tuning optimizer via `create_optimizer`.

    With `num_train_steps` known: linear warm-up over `warmup_steps` (or
    `warmup_ratio * num_train_steps`, rounded) then linear decay to 0 at
    `num_train_steps`. With `num_train_steps=None` the total is unknown, so
    the rate stays constant at `learning_rate` after the warm-up (only an
    explicit `warmup_steps` warms up; `warmup_ratio` needs a total).
    Other keyword arguments go to `create_optimizer` (optimizer="lamb",
    clipnorm, accumulation_steps, ...).
    """
    if num_train_steps is not None:
        num_train_steps = int(num_train_steps)
        if num_train_steps <= 0:
            raise ValueError(
                f"num_train_steps must be a positive number of optimizer "
                f"updates, got {num_train_steps}."
            )
        if warmup_steps is None:
            if not 0.0 <= float(warmup_ratio) <= 1.0:
                raise ValueError(
                    f"warmup_ratio must be in [0, 1], got {warmup_ratio!r}."
                )
            warmup_steps = int(round(float(warmup_ratio) * num_train_steps))
        return create_optimizer(
            learning_rate,
            num_train_steps=num_train_steps,
            warmup_steps=int(warmup_steps),
            weight_decay=weight_decay,
            layer_decay=layer_decay,
            **kwargs,
        )
    # Unknown total: warm up (if asked) then hold the peak. The schedule's
    # decay ends at the warm-up and decays to the peak itself.
    warmup_steps = int(warmup_steps or 0)
    return create_optimizer(
        learning_rate,
        num_train_steps=max(warmup_steps, 1),
        warmup_steps=warmup_steps,
        end_learning_rate=learning_rate,
        weight_decay=weight_decay,
        layer_decay=layer_decay,
        **kwargs,
    )


class Task(BackboneModel):
    """Base class of the fine-tuning task models: a backbone and a head.

    Subclasses build their head layers (with `dtype=self.head_dtype`) in
    `__init__` after calling `super().__init__(backbone, ...)`, implement
    `call`, `default_loss()` and `default_metrics()` (and optionally
    `default_weighted_metrics()`), and list their own constructor
    arguments in `get_config` (the backbone and dropout are handled here).

    Args:
        backbone: a `kerasbert.models.Backbone` (BertBackbone, ...).
        dropout: float. Dropout applied to the backbone output before the
            head (0.1, as in BERT fine-tuning).
        dtype: defaults to the backbone's dtype policy.
    """

    def __init__(self, backbone, dropout=0.1, dtype=None, **kwargs):
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}.")
        super().__init__(backbone, dtype=dtype, **kwargs)
        self.dropout = float(dropout)
        self.output_dropout = keras.layers.Dropout(
            self.dropout, dtype=backbone.dtype_policy, name="output_dropout"
        )

    def encode(self, inputs, training=False):
        """The backbone's output dict for a feature dict."""
        return self.backbone(backbone_inputs(inputs), training=training)

    # --- training setup ---------------------------------------------------

    def default_loss(self):
        """The loss `compile(loss="auto")` uses; every task class defines it."""
        raise NotImplementedError(f"{type(self).__name__} must define default_loss().")

    def default_metrics(self):
        return None

    def default_weighted_metrics(self):
        return None

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        *,
        metrics="auto",
        weighted_metrics="auto",
        learning_rate=2e-5,
        num_train_steps=None,
        warmup_ratio=0.1,
        warmup_steps=None,
        weight_decay=0.01,
        layer_decay=None,
        **kwargs,
    ):
        """Configures the model for `fit` with fine-tuning defaults.

        Args:
            optimizer: "auto" builds kerasbert's AdamW (see
                `fine_tuning_optimizer`: weight decay except LayerNorm and
                biases, warm-up then linear decay over `num_train_steps`, or
                a constant rate after warm-up when that is None, global-norm
                clipping 1.0, optional `layer_decay`). Anything else goes to
                `keras.Model.compile` as is (then the learning-rate
                arguments below are ignored).
            loss: "auto" = the task's default (see the class docstring).
            metrics, weighted_metrics: "auto" = the task's defaults.
            learning_rate: peak learning rate (2e-5).
            num_train_steps: total optimizer updates (epochs *
                steps_per_epoch), or None.
            warmup_ratio: warm-up share of num_train_steps (0.1).
            warmup_steps: explicit warm-up length; overrides warmup_ratio.
            weight_decay: 0.01.
            layer_decay: float in (0, 1] or None: layer-wise LR decay.
            **kwargs: `keras.Model.compile` arguments (run_eagerly,
                jit_compile, steps_per_execution, loss_weights, ...).
        """
        if isinstance(optimizer, str) and optimizer == "auto":
            optimizer = fine_tuning_optimizer(
                learning_rate=learning_rate,
                num_train_steps=num_train_steps,
                warmup_ratio=warmup_ratio,
                warmup_steps=warmup_steps,
                weight_decay=weight_decay,
                layer_decay=layer_decay,
            )
        if isinstance(loss, str) and loss == "auto":
            loss = self.default_loss()
        if isinstance(metrics, str) and metrics == "auto":
            metrics = self.default_metrics()
        if isinstance(weighted_metrics, str) and weighted_metrics == "auto":
            weighted_metrics = self.default_weighted_metrics()
        super().compile(
            optimizer=optimizer,
            loss=loss,
            metrics=metrics,
            weighted_metrics=weighted_metrics,
            **kwargs,
        )

    # --- config -----------------------------------------------------------

    def get_config(self):
        return {**super().get_config(), "dropout": self.dropout}
