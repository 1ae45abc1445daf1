"""`BackboneModel`: what every model built on a backbone shares — the
pretrainers and the fine-tuning tasks alike.

- The dtype policy follows the backbone's, so `compile` wraps the optimizer
  in a `LossScaleOptimizer` when the backbone is mixed_float16.
- `get_config` / `from_config` serialize the backbone; subclasses add their
  own constructor arguments to `get_config`, so `.keras` files load in
  safe mode.
- `compile_from_config` recompiles a loaded model (Keras skips that for
  models that override `compile`), after which Keras restores the optimizer
  state.
"""

import keras

import kerasbert.models  # noqa: F401  (registers the backbones, so saved models load)
from kerasbert.sources import source


class BackboneModel(keras.Model):
    """Base of models that own a `kerasbert.models.Backbone`.

    Args:
        backbone: the backbone.
        dtype: defaults to the backbone's dtype policy.
    """

    def __init__(self, backbone, dtype=None, **kwargs):
        if dtype is None:
            dtype = backbone.dtype_policy
        super().__init__(dtype=dtype, **kwargs)
        self.backbone = backbone

    @classmethod
    def from_preset(cls, handle, *, backbone_overrides=None, dtype=None, **kwargs):
        """This model on the backbone a handle stands for.

        `TextClassifier.from_preset("hf://google-bert/bert-base-uncased",
        num_classes=3)` starts from the published weights;
        `TextClassifier.from_preset("bert_tiny", num_classes=2)` from a
        random architecture.

        Args:
            handle: a preset name, hf://..., kaggle://..., a model directory
                or `.keras` file (`kerasbert.loading`).
            backbone_overrides: backbone arguments that keep the weights'
                shapes (e.g. {"dropout": 0.0}).
            dtype: the backbone's (and so the model's) dtype policy.
            **kwargs: this model's own arguments (num_classes, dropout, ...).
        """
        backbone = source.load_backbone(handle, dtype=dtype, **(backbone_overrides or {}))
        return cls(backbone, **kwargs)

    @property
    def head_dtype(self):
        """Policy for head layers: the backbone's."""
        return self.backbone.dtype_policy

    def build(self, input_shape=None):
        # Heads are built in __init__ (their sizes come from the backbone).
        self.built = True

    def compile_from_config(self, config):
        self._recompile(keras.saving.deserialize_keras_object(config))

    def _recompile(self, compile_args):
        self.compile(**compile_args)
        if self.optimizer is not None and self.built:
            self.optimizer.build(self.trainable_variables)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            "backbone": keras.saving.serialize_keras_object(self.backbone),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("backbone"), dict):
            config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)
