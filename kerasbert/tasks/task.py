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
  (`kerasbert.optimizers.OptimizerOptions`: AdamW, weight decay 0.01 except
  LayerNorm and biases, linear warm-up, linear decay, global-norm clipping
  1.0, optional layer-wise learning-rate decay) and the task's default
  loss and metrics.
"""

import contextlib
import dataclasses

import keras
from keras import ops

from kerasbert.errors import UsageError
from kerasbert.optimizers.optimizer_options import OptimizerOptions
from kerasbert.tasks.task_presets import build_from_preset
from kerasbert import export_door
from kerasbert.layers import FastDropout
from kerasbert.tasks.backbone_model import BackboneModel
from kerasbert.tasks.multi_worker import symbolic_build_inputs
from kerasbert.tasks.multi_worker import worker_logs
from kerasbert.tasks.raw_text_fit import batches_per_epoch
from kerasbert.tasks.raw_text_fit import data_errors
from kerasbert.tasks.raw_text_fit import dense_outputs
from kerasbert.tasks.raw_text_fit import fit_inputs
from kerasbert.tasks.raw_text_fit import is_raw
from kerasbert.tasks.raw_text_fit import padded_outputs
from kerasbert.tasks.raw_text_fit import predict_raw
from kerasbert.tasks.raw_text_fit import refuse_empty
from kerasbert.tasks.raw_text_fit import raw_dataset

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
    if "input_char_ids" in inputs:  # ELMo: characters [B, W, C] and a word mask
        return {k: ops.cast(inputs[k], "int32") for k in ("input_char_ids", "input_mask")}
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


class LazyPreprocessorClass:
    """A task class's `preprocessor_class`, imported on first read.

    The preprocessors run in `tf.data` (tensorflow-text tokenizers), the
    task models on any Keras backend: a task module names its preprocessor
    through this, so `import kerasbert.tasks` under JAX or PyTorch never
    loads TensorFlow. Reading the attribute (`from_preset`, `from_config`
    of a model saved with a preprocessor, `kerasbert finetune`, export)
    imports the class, which registers it with Keras.

        preprocessor_class = LazyPreprocessorClass(_preprocessor_class)

    `load`: a function returning the class (its import marked `# lazy:`).
    """

    def __init__(self, load):
        self._load = load

    def __get__(self, instance, owner=None):
        return self._load()


def head_initializer(backbone):
    """Truncated normal with the backbone's `initializer_range` (0.02)."""
    return keras.initializers.TruncatedNormal(
        stddev=getattr(backbone, "initializer_range", 0.02)
    )


def fine_tuning_optimizer(options=None, **keywords):
    """The BERT fine-tuning optimizer: `OptimizerOptions(**keywords).build()`
    (or `options.build()`, given an `OptimizerOptions`).

    With `num_train_steps` known: linear warm-up over `warmup_steps` (or
    `warmup_ratio * num_train_steps`, rounded; 0.1 by default) then linear
    decay to 0 at `num_train_steps`. With `num_train_steps=None` the total
    is unknown, so the rate stays constant at `learning_rate` (2e-5) after
    the warm-up (only an explicit `warmup_steps` warms up; `warmup_ratio`
    needs a total). The other keywords are `OptimizerOptions`' (weight_decay,
    layer_decay, optimizer="lamb", clipnorm, accumulation_steps, ...).
    """
    if options is None:
        options = OptimizerOptions(**keywords)
    elif keywords:
        options = dataclasses.replace(options, **keywords)
    return options.build()


class Task(BackboneModel):
    """Base class of the fine-tuning task models: a backbone and a head,
    and (when built from a handle, a run directory or a tokenizer) the
    preprocessor that lets `fit`, `evaluate`, `predict`, `save` and
    `export` work on raw text.

    Subclasses build their head layers (with `dtype=self.head_dtype`) in
    `__init__` after calling `super().__init__(backbone, ...)`, implement
    `call`, `default_loss()` and `default_metrics()` (and optionally
    `default_weighted_metrics()`), list their own constructor arguments
    in `get_config` (the backbone, dropout and preprocessor are handled
    here), and name their `preprocessor_class`
    (`kerasbert.preprocessing`).

    Args:
        backbone: a `kerasbert.models.Backbone` (BertBackbone, ...).
        dropout: float. Dropout applied to the backbone output before the
            head (0.1, as in BERT fine-tuning).
        preprocessor: a `kerasbert.preprocessing.TaskPreprocessor` (the
            tokenizer, packed length and label names), or None: the model
            then takes token-id dicts only.
        dtype: defaults to the backbone's dtype policy.

    With a preprocessor, `fit`, `evaluate` and `predict` take raw inputs
    (lists or arrays of strings, or `tf.data` datasets of strings: see the
    task's preprocessor class) as well as token-id dicts; tokenization runs
    in the `tf.data` pipeline, never in the compiled step.

    Example:

    >>> from kerasbert.models import BertBackbone
    >>> from kerasbert.preprocessing import TextClassifierPreprocessor
    >>> from kerasbert.tasks import TextClassifier
    >>> from kerasbert.text import ByteTokenizer
    >>> preprocessor = TextClassifierPreprocessor(ByteTokenizer(), sequence_length=16,
    ...                                           label_names=["bad", "good"])
    >>> backbone = BertBackbone(vocabulary_size=258, num_layers=1, num_heads=2, hidden_dim=8,
    ...                         intermediate_dim=16, max_sequence_length=16)
    >>> model = TextClassifier(backbone, num_classes=2, preprocessor=preprocessor)
    >>> model.predict(["a good movie", "bad"], verbose=0).shape   # raw text in, [B, classes]
    (2, 2)
    """

    #: the `TaskPreprocessor` subclass of this task (None: token ids only).
    preprocessor_class = None
    #: the constructor argument that `from_preset(label_names=...)` sizes.
    label_argument = None

    def __init__(self, backbone, dropout=0.1, preprocessor=None, dtype=None, **kwargs):
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}.")
        super().__init__(backbone, dtype=dtype, **kwargs)
        self.dropout = float(dropout)
        self.output_dropout = FastDropout(
            self.dropout, dtype=backbone.dtype_policy, name="output_dropout"
        )
        self.preprocessor = preprocessor
        self._recipe_compile = None
        self._repeated_input = False  # fit's dataset repeats (`raw_text_fit.one_iterator`)

    def encode(self, inputs, training=False):
        """The backbone's output dict for a feature dict."""
        return self.backbone(backbone_inputs(inputs), training=training)

    # --- built from a handle ------------------------------------------------

    @classmethod
    def from_preset(cls, handle, *, tokenizer=None, sequence_length=None, label_names=None,
                    compile=True, backbone_overrides=None, dtype=None, **kwargs):
        """This task on the backbone and tokenizer a handle stands for,
        compiled with the recipe of its family and size.

            model = TextClassifier.from_preset(DIR, num_classes=3)
            model.fit(x=texts, y=labels, epochs=3)

        Args:
            handle: a preset name, hf://..., kaggle://..., a published or
                kerasbert run directory, or a `.keras` file
                (`kerasbert.loading`).
            tokenizer: a `kerasbert.text` tokenizer or a path
                (`load_tokenizer`); default: the handle's own (a built-in
                preset name has none: then the model takes token ids only).
            sequence_length: the packed length T (default: the task
                type's, at most the backbone's positions).
            label_names: class or tag names in id order; they set the
                number of outputs when it is not given.
            compile: compile with the recipe's optimizer, schedule, loss
                and metrics (`kerasbert.optimizers.recipes`); the
                schedule's length is set by the first `fit`.
            backbone_overrides: backbone arguments that keep the weights'
                shapes (e.g. {"dropout": 0.0}).
            dtype: the backbone's (and so the model's) dtype policy:
                "mixed_bfloat16" fine-tunes with bfloat16 matrix products
                (float32 weights, optimizer state, softmax, LayerNorm,
                GELU, loss and the residual stream); faster where the hardware has bfloat16
                kernels (`kerasbert info` says), slower on CPUs without.
            **kwargs: this task's own arguments (num_classes, dropout, ...)
                and its preprocessor's `options` (QA: doc_stride,
                max_query_length, ...) and batching options: padding
                ("longest", the default: each batch padded to its longest
                row; "max_length": to T), pad_to_multiple_of (8),
                bucket_by_length (False).
        """
        return build_from_preset(cls, handle, tokenizer=tokenizer,
                                 sequence_length=sequence_length, label_names=label_names,
                                 compile=compile, backbone_overrides=backbone_overrides,
                                 dtype=dtype, **kwargs)

    def preprocessor_arguments(self):
        """Arguments this task gives its preprocessor (task type, sizes)."""
        return {}

    def num_label_names(self):
        """How many label names the head has room for (None: no names)."""
        return None

    # --- raw text in fit / evaluate / predict -------------------------------

    def _raw(self, x):
        """Whether `x` is raw input (then it needs the preprocessor)."""
        return is_raw(self, x)

    def _raw_dataset(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False,
                     seed=None):
        return raw_dataset(self, x, y, sample_weight, batch_size, shuffle, seed)

    def batch_padding(self):
        """How batches of token ids for this model are padded
        (`make_dataset(padding=...)`): "max_length" when the step needs one
        shape, else its preprocessor's ("longest" without one)."""
        if self.needs_fixed_shapes():
            return "max_length"
        return getattr(self.preprocessor, "padding", "longest")

    def needs_fixed_shapes(self):
        """Whether every batch must be padded to T (so the preprocessor's
        padding="longest" is set aside): a step compiled with XLA on
        TensorFlow (`jit_compile=True`), several steps per execution, a TPU
        strategy, or a backbone whose attention depends on the length
        (BigBird's block-sparse pattern, the Reformer's LSH chunks:
        `Backbone.exact_at_any_length`). JAX compiles each length once; at
        most `padding.shape_bound(T)` of them."""
        if not getattr(self.backbone, "exact_at_any_length", True):
            return True
        if int(getattr(self, "steps_per_execution", 1) or 1) > 1:
            return True
        if keras.backend.backend() == "tensorflow":
            if getattr(self, "jit_compile", False) is True:
                return True
            strategy = getattr(self, "_distribute_strategy", None)
            if strategy is not None and "TPU" in type(strategy).__name__:
                return True
        return False

    def fit(self, x=None, y=None, batch_size=None, epochs=1, *, validation_data=None,
            shuffle=True, sample_weight=None, seed=None, **kwargs):
        """`keras.Model.fit`, and on raw inputs too (see the class).

        Raw inputs are batched by `batch_size` (the recipe's, 32, when not
        given) and shuffled every epoch when `shuffle` (by `seed`, else
        TensorFlow's global seed: `keras.utils.set_random_seed` makes it
        repeatable); `validation_data` may be raw as `(x, y)`. A model
        compiled by `from_preset` sets its schedule's length (warm-up, then
        linear decay to 0) from the epochs and batches here, on the first
        call.
        """
        refuse_empty(x, "fit")
        x, y, batch_size, validation_data, shuffle, sample_weight = fit_inputs(
            self, x, y, batch_size, epochs, validation_data, shuffle, sample_weight, seed, kwargs)
        self._size_recipe_schedule(x, y, batch_size, epochs, kwargs.get("steps_per_epoch"))
        try:
            with data_errors():
                return super().fit(x, y, batch_size=batch_size, epochs=epochs,
                                   validation_data=validation_data, shuffle=shuffle,
                                   sample_weight=sample_weight, **kwargs)
        finally:
            self._repeated_input = False

    def evaluate(self, x=None, y=None, batch_size=None, *, sample_weight=None, **kwargs):
        """`keras.Model.evaluate`, and on raw inputs with their labels."""
        refuse_empty(x, "evaluate")
        if self._raw(x):
            x = self._raw_dataset(x, y, sample_weight, batch_size or self.default_batch_size())
            y = sample_weight = batch_size = None
        with data_errors():
            return super().evaluate(x, y, batch_size=batch_size, sample_weight=sample_weight,
                                    **kwargs)

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """`keras.Model.predict`; on raw inputs, the preprocessor decodes the
        outputs (probabilities, spans, per-word tags: see its class). Raw
        lists run in length order (short rows batched together, so the
        batches' padding is small) and come back in input order."""
        refuse_empty(x, "predict")
        if not self._raw(x):
            return dense_outputs(self, super().predict(
                x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks))
        return predict_raw(self, x, batch_size, super().predict, verbose=verbose, steps=steps,
                           callbacks=callbacks)

    #: whether every output has the token axis (axis 1): tagging, QA.
    per_token_outputs = False

    def predict_step(self, *args):
        # JAX's step is (state, data) -> (outputs, variables); the others' data -> outputs.
        result = super().predict_step(*args)
        if len(args) == 2:
            return padded_outputs(self, result[0]), result[1]
        return padded_outputs(self, result)

    def default_batch_size(self):
        """Raw inputs' batch size when none is given: the recipe's, else 32."""
        return (self._recipe_compile or {}).get("batch_size", 32)

    # --- under MultiWorkerMirroredStrategy: tasks/multi_worker.py -------------

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        iterator, data_batch = symbolic_build_inputs(self, iterator, data_batch)
        return super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)

    def train_step(self, *args, **kwargs):
        return worker_logs(self, super().train_step(*args, **kwargs))

    def test_step(self, *args, **kwargs):
        return worker_logs(self, super().test_step(*args, **kwargs))

    # --- export ----------------------------------------------------------------

    def export(self, filepath, format="tf_serving", verbose=True, **kwargs):
        """Writes a TF Serving SavedModel that takes raw text (the same as
        `kerasbert export`: tokenizer and packer in the graph, decoded
        labels / spans / tags out, warm-up requests, versions).

        Args:
            filepath: the model's base directory (`export/NAME`); the
                version directory goes under it.
            format: "tf_serving" (ours, needs the preprocessor), or a
                `keras.Model.export` format for token-id inputs.
            **kwargs: `kerasbert.serving.export_task` options: version,
                overwrite, model_name, graph, sequence_length, precision
                ("bfloat16": the served model computes in bfloat16, about
                2x faster where the hardware has bfloat16 kernels, and
                returns float32; default "float32").

        Returns:
            dict: path, version, task_type, signatures, custom_ops.
        """
        if format != "tf_serving":
            return super().export(filepath, format=format, verbose=verbose, **kwargs)
        if self.preprocessor is None:
            raise UsageError(f"This {type(self).__name__} has no preprocessor (no tokenizer) "
                             "to put in the graph: build it with from_preset(handle) or "
                             "tokenizer=..., or use format='tf_saved_model' for token ids.")
        return export_door.export(self, filepath, **kwargs)

    # --- training setup ---------------------------------------------------

    def default_loss(self):
        """The loss `compile(loss="auto")` uses; every task class defines it."""
        raise NotImplementedError(f"{type(self).__name__} must define default_loss().")

    def default_metrics(self):
        return None

    def default_weighted_metrics(self):
        return None

    def compile(self, optimizer="auto", loss="auto", *, metrics="auto",
                weighted_metrics="auto", **kwargs):
        """Configures the model for `fit` with fine-tuning defaults.

        Args:
            optimizer: "auto" builds kerasbert's AdamW from the
                `OptimizerOptions` keywords below (`fine_tuning_optimizer`:
                weight decay except LayerNorm and biases, warm-up then
                linear decay over `num_train_steps`, or a constant rate after
                warm-up when that is None, global-norm clipping 1.0, optional
                `layer_decay`); an `OptimizerOptions` is built with the
                keywords below replacing its fields.
                Anything else goes to `keras.Model.compile` as is (then the
                learning-rate keywords are ignored).
            loss: "auto" = the task's default (see the class docstring).
            metrics, weighted_metrics: "auto" = the task's defaults.
            **kwargs: `OptimizerOptions` fields for "auto":
                learning_rate (2e-5), num_train_steps (total optimizer
                updates, or None), warmup_ratio (0.1), warmup_steps
                (overrides the ratio), weight_decay (0.01), layer_decay
                (None), clipnorm (1.0; None: no clipping; under a
                `tf.distribute` strategy the norm is that of the all-reduced
                gradient, so N replicas clip as one device); and
                `keras.Model.compile` arguments (run_eagerly, jit_compile,
                steps_per_execution, loss_weights, ...).
        """
        # A compile by the user replaces the recipe's (and its sizing by fit).
        self._recipe_compile = None
        given = optimizer if isinstance(optimizer, OptimizerOptions) else None
        options, kwargs = OptimizerOptions.split(kwargs, given)
        if given is not None or (isinstance(optimizer, str) and optimizer == "auto"):
            optimizer = fine_tuning_optimizer(options)
        if isinstance(loss, str) and loss == "auto":
            loss = self.default_loss()
        if isinstance(metrics, str) and metrics == "auto":
            metrics = self.default_metrics()
        if isinstance(weighted_metrics, str) and weighted_metrics == "auto":
            weighted_metrics = self.default_weighted_metrics()
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics,
                        weighted_metrics=weighted_metrics, **kwargs)

    def compile_with_recipe(self, recipe):
        """Compiles with a recipe's rate, warm-up share, weight decay and
        layer-wise decay (`kerasbert.optimizers.recipes.Recipe`); the first
        `fit` then sizes the schedule (warm-up share of all its updates,
        linear decay to 0 at the end) and takes the recipe's batch size for
        raw inputs. A later `compile()` replaces all of it."""
        arguments = dict(learning_rate=recipe.learning_rate, warmup_ratio=recipe.warmup_ratio,
                         weight_decay=recipe.weight_decay, layer_decay=recipe.layerwise_lr_decay)
        self.compile(**arguments)
        self._recipe_compile = dict(arguments, batch_size=recipe.batch_size)

    def _size_recipe_schedule(self, x, y, batch_size, epochs, steps_per_epoch):
        """Recompiles a recipe-compiled model whose optimizer has not stepped
        with the schedule's length, once the batches per epoch are known."""
        recipe = self._recipe_compile
        if not recipe or self.optimizer is None or int(self.optimizer.iterations.numpy()) > 0:
            return
        steps = steps_per_epoch or batches_per_epoch(x, y, batch_size)
        if not steps:
            return
        arguments = {k: v for k, v in recipe.items() if k != "batch_size"}
        # Under a tf.distribute strategy the new optimizer's slots must be
        # made in its scope, as the first compile's were.
        strategy = getattr(self, "distribute_strategy", None)
        with strategy.scope() if strategy is not None else contextlib.nullcontext():
            self.compile(**arguments, num_train_steps=int(steps) * int(epochs))
        self._recipe_compile = recipe

    # --- config -----------------------------------------------------------

    def get_config(self):
        config = {**super().get_config(), "dropout": self.dropout}
        if self.preprocessor is not None:
            config["preprocessor"] = keras.saving.serialize_keras_object(self.preprocessor)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("preprocessor"), dict):
            _ = cls.preprocessor_class  # imports the class, so Keras knows its name
            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return super().from_config(config)

