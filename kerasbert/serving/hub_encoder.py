"""`HubEncoder`: a backbone as a TF Hub "Reusable SavedModel" encoder
(`__call__(inputs, training)`, `variables`, `trainable_variables`,
`regularization_losses`, the `.mlm` sub-object). See `hub_export`."""

from kerasbert.serving.task_serving import MODEL_INPUTS


def _int_spec(shape, name):
    import tensorflow as tf

    return tf.TensorSpec(shape, tf.int32, name=name)


def _tf_variables(variables):
    """The `tf.Variable`s behind Keras variables (Keras 3 wraps them), so
    the saved lists hold the very variables the traced functions read."""
    import tensorflow as tf

    result = []
    for variable in variables:
        value = getattr(variable, "value", variable)
        if not isinstance(value, tf.Variable):
            raise TypeError(f"{getattr(variable, 'path', variable)} is not backed by a "
                            "tf.Variable (export needs the TensorFlow backend).")
        result.append(value)
    return result


def _encoder_outputs(backbone, inputs, training):
    """Backbone outputs in TF Hub form: float32, plus the "default" alias.

    Args:
        inputs: dict of int32 [B, T] (extra keys are ignored).

    Returns:
        dict pooled_output [B, H], sequence_output [B, T, H],
        encoder_outputs (list of [B, T, H]), default [B, H].
    """
    import tensorflow as tf

    outputs = backbone({k: inputs[k] for k in MODEL_INPUTS}, training=training)
    result = {
        "pooled_output": tf.cast(outputs["pooled_output"], tf.float32),
        "sequence_output": tf.cast(outputs["sequence_output"], tf.float32),
        "encoder_outputs": [tf.cast(x, tf.float32) for x in outputs["encoder_outputs"]],
    }
    result["default"] = result["pooled_output"]
    return result


def _reusable(call, input_spec, variables, trainable_variables):
    """A "Reusable SavedModel" object: `__call__(inputs, training=False)`
    traced for both values of `training`, and its variable lists.

    A `tf.train.Checkpoint` (not a `tf.Module`, whose `variables` are
    read-only properties) holds the lists, so they are saved as attributes.
    The Keras model itself is not tracked (only `call`'s closure holds it):
    the SavedModel holds just the `tf.Variable`s listed here, which are the
    ones the traced functions read, so `hub.KerasLayer` trains exactly them.
    """
    import tensorflow as tf

    obj = tf.train.Checkpoint()
    obj.__call__ = tf.function(call, autograph=False)
    for training in (False, True):
        obj.__call__.get_concrete_function(input_spec, training=training)
    obj.variables = list(variables)
    obj.trainable_variables = list(trainable_variables)
    obj.regularization_losses = []  # BERT has none; hub.KerasLayer reads the list.
    return obj


class HubEncoder:
    """Builds the encoder SavedModel's root object from a Keras backbone.

    Args:
        backbone: a kerasbert backbone (inputs/outputs as `BertBackbone`).
        masked_lm_head: optional `MaskedLMHead` tied to `backbone`'s token
            embedding (a `BertPretrainer`'s, whose backbone is `backbone`):
            adds the `.mlm` sub-object.
        vocab_file: the tokenizer's vocabulary file to carry as an asset
            (vocab.txt, sentencepiece.model or vocab.json; or None).
        lower_case: saved as `do_lower_case`.
    """

    def __init__(self, backbone, masked_lm_head=None, vocab_file=None, lower_case=True):
        self.backbone = backbone
        self.masked_lm_head = masked_lm_head
        self.vocab_file = vocab_file
        self.lower_case = bool(lower_case)

    def _input_spec(self, with_positions=False):
        spec = {name: _int_spec([None, None], name) for name in MODEL_INPUTS}
        if with_positions:
            spec["masked_lm_positions"] = _int_spec([None, None], "masked_lm_positions")
        return spec

    def _mlm(self):
        import tensorflow as tf

        backbone, head = self.backbone, self.masked_lm_head

        def call(inputs, training=False):
            result = _encoder_outputs(backbone, inputs, training)
            logits = head(result["sequence_output"], inputs["masked_lm_positions"],
                          training=training)
            result["mlm_logits"] = tf.cast(logits, tf.float32)
            return result

        # Unique by identity: the head's tied embedding is the backbone's.
        variables = _unique(backbone.variables + head.variables)
        trainable = _unique(backbone.trainable_variables + head.trainable_variables)
        return _reusable(call, self._input_spec(with_positions=True),
                         _tf_variables(variables), _tf_variables(trainable))

    def build(self):
        """-> (root object, signatures) for `tf.saved_model.save`."""
        import tensorflow as tf

        backbone = self.backbone

        def call(inputs, training=False):
            return _encoder_outputs(backbone, inputs, training)

        root = _reusable(call, self._input_spec(),
                         _tf_variables(backbone.variables),
                         _tf_variables(backbone.trainable_variables))
        if self.masked_lm_head is not None:
            root.mlm = self._mlm()
        if self.vocab_file is not None:
            root.vocab_file = tf.saved_model.Asset(self.vocab_file)
        root.do_lower_case = tf.Variable(self.lower_case, trainable=False, name="do_lower_case")

        def serving_default(input_word_ids, input_mask, input_type_ids):
            outputs = call(dict(input_word_ids=input_word_ids, input_mask=input_mask,
                                input_type_ids=input_type_ids), training=False)
            layers = outputs.pop("encoder_outputs")
            outputs.update({f"encoder_outputs_{i}": x for i, x in enumerate(layers)})
            return outputs

        signature = tf.function(serving_default, autograph=False).get_concrete_function(
            *[_int_spec([None, None], name) for name in MODEL_INPUTS]
        )
        return root, {"serving_default": signature}


def _unique(variables):
    seen, result = set(), []
    for variable in variables:
        if id(variable) not in seen:
            seen.add(id(variable))
            result.append(variable)
    return result
