"""A shared TestCase so each layer and model test stays a few lines long.

Every helper checks something real: shapes, config round trips, saved files
reloading to identical outputs, gradients reaching every weight, finite half
precision forward passes.
"""

import json
import os
import tempfile

import keras
import numpy as np
from keras import ops

from kerasbert.testing.fixtures import tiny_encoder_config
from kerasbert.testing.fixtures import tiny_encoder_inputs

HALF_POLICIES = ("mixed_float16", "mixed_bfloat16")
BACKBONE_INPUTS = ("input_mask", "input_type_ids", "input_word_ids")
BACKBONE_OUTPUTS = ("encoder_outputs", "pooled_output", "sequence_output")


def _to_numpy(tree):
    return keras.tree.map_structure(lambda x: np.asarray(ops.convert_to_numpy(x)), tree)


def _call(obj, inputs, **kwargs):
    """Calls with a tuple as positional arguments, anything else as one."""
    if isinstance(inputs, tuple):
        return obj(*inputs, **kwargs)
    return obj(inputs, **kwargs)


class TestCase:
    """Base class for pytest test classes (no unittest machinery needed).

    Example:

    >>> import numpy as np
    >>> from kerasbert.layers import Highway
    >>> from kerasbert.testing import TestCase
    >>> case = TestCase()                                    # or subclass it in a pytest file
    >>> layer = case.run_layer_test(Highway, {"num_layers": 1}, np.ones((2, 3, 4), "float32"),
    ...                             expected_output_shape=(2, 3, 4))   # config, gradients, fp16
    >>> type(layer).__name__
    'Highway'
    >>> case.assertAllClose([1.0, 2.0], [1.0, 2.5])
    Traceback (most recent call last):
    ...
    AssertionError: ...
    """

    # --- assertions -------------------------------------------------------

    def assertAllClose(self, expected, actual, atol=1e-6, rtol=1e-6, msg=""):
        expected, actual = _to_numpy(expected), _to_numpy(actual)
        keras.tree.assert_same_structure(expected, actual)
        for e, a in zip(keras.tree.flatten(expected), keras.tree.flatten(actual)):
            np.testing.assert_allclose(
                np.asarray(a, "float64"),
                np.asarray(e, "float64"),
                atol=atol,
                rtol=rtol,
                err_msg=msg,
            )

    def assertAllFinite(self, tree, msg=""):
        for x in keras.tree.flatten(_to_numpy(tree)):
            assert np.isfinite(np.asarray(x, "float32")).all(), (
                f"non-finite values {msg}"
            )

    # --- serialization ----------------------------------------------------

    def run_serialization_test(self, instance):
        """get_config -> from_config -> get_config is a fixed point, the
        config is JSON-serialisable and the class is registered under the
        "kerasbert" package."""
        cls = instance.__class__
        registered = keras.saving.get_registered_name(cls)
        assert registered.startswith("kerasbert>"), (
            f"{cls.__name__} is not registered under package 'kerasbert' "
            f"(got {registered!r})"
        )
        config = instance.get_config()
        json.dumps(config)
        revived = cls.from_config(config)
        assert revived.get_config() == config
        serialized = keras.saving.serialize_keras_object(instance)
        revived = keras.saving.deserialize_keras_object(serialized)
        assert type(revived) is cls
        assert revived.get_config() == config
        return revived

    # --- layers -----------------------------------------------------------

    def run_layer_test(
        self,
        cls,
        init_kwargs,
        input_data,
        expected_output_shape,
        expected_num_trainable_weights=None,
        call_kwargs=None,
        run_training_check=True,
        run_precision_check=True,
    ):
        """Builds `cls(**init_kwargs)`, calls it on `input_data` (a tuple is
        unpacked into positional arguments) and checks output shape, config
        round trip, trainable weight count, gradients and half precision."""
        call_kwargs = call_kwargs or {}
        layer = cls(**init_kwargs)
        output = _call(layer, input_data, **call_kwargs)
        shapes = keras.tree.map_structure(lambda x: tuple(x.shape), output)
        assert shapes == expected_output_shape, (
            f"{cls.__name__} output shape {shapes}, expected "
            f"{expected_output_shape}"
        )
        if expected_num_trainable_weights is not None:
            assert len(layer.trainable_weights) == expected_num_trainable_weights
        self.run_serialization_test(layer)
        # A rebuilt layer given the same weights computes the same function.
        revived = cls.from_config(layer.get_config())
        _call(revived, input_data, **call_kwargs)
        revived.set_weights(layer.get_weights())
        self.assertAllClose(
            output, _call(revived, input_data, **call_kwargs), atol=1e-6
        )
        if run_training_check:
            self.run_gradient_check(layer, input_data, call_kwargs)
        if run_precision_check:
            self.run_precision_test(cls, init_kwargs, input_data, call_kwargs)
        return layer

    def run_gradient_check(self, layer, input_data, call_kwargs=None):
        """Every trainable weight gets a non-zero gradient (TF backend) or,
        on other backends, changes after one SGD step."""
        call_kwargs = call_kwargs or {}
        if keras.config.backend() != "tensorflow":
            return
        import tensorflow as tf

        with tf.GradientTape() as tape:
            out = _call(layer, input_data, training=True, **call_kwargs)
            loss = sum(
                tf.reduce_sum(tf.square(tf.cast(x, "float32")))
                for x in keras.tree.flatten(out)
            )
        grads = tape.gradient(loss, layer.trainable_weights)
        for weight, grad in zip(layer.trainable_weights, grads):
            assert grad is not None, f"no gradient reaches {weight.path}"
            assert np.any(np.asarray(grad) != 0), f"zero gradient: {weight.path}"

    def run_precision_test(self, cls, init_kwargs, input_data, call_kwargs=None):
        """Under mixed_float16 and mixed_bfloat16: variables stay float32,
        outputs are finite, and the layer's config records the policy."""
        call_kwargs = call_kwargs or {}
        for policy in HALF_POLICIES:
            layer = cls(**{**init_kwargs, "dtype": policy})
            output = _call(layer, input_data, **call_kwargs)
            self.assertAllFinite(output, f"under {policy}")
            for weight in layer.weights:
                assert weight.dtype == "float32", (
                    f"{weight.path} is {weight.dtype} under {policy}"
                )
            assert layer.dtype_policy.name == policy

    # --- models -----------------------------------------------------------

    def run_backbone_test(
        self, cls, init_kwargs=None, input_data=None, expected_output_shape=None,
        run_saving_check=True, run_precision_check=True, run_contract_check=True,
        run_padding_check=True, run_saved_model_check=True, run_type_ids_check=True,
        padding_atol=1e-6, sequence_input="input_word_ids", mask_inputs=("input_mask",),
    ):
        """Checks a backbone built as `cls(**init_kwargs)` (default: the tiny
        encoder of `tiny_encoder_config()`) on `input_data` (default:
        `tiny_encoder_inputs()`), and returns it.

        Always: output shapes (every key; computed from the config when
        `expected_output_shape` is None: `sequence_output` [B, T, H],
        `pooled_output` [B, H], `encoder_outputs` num_layers x [B, T, H]),
        config round trip and registration, a shorter sequence without
        rebuilding. Also, unless switched off for a family that truly
        differs:

        - `run_contract_check`: the TF Hub tensor names (inputs exactly
          `input_mask`, `input_type_ids`, `input_word_ids`, all int32;
          outputs exactly `encoder_outputs`, `pooled_output`,
          `sequence_output`) and the last encoder output is the
          `sequence_output`;
        - `run_padding_check`: `run_padding_test` (changing the token ids
          under padding changes nothing a real token sees);
        - `run_type_ids_check`: `run_type_ids_test` (type ids matter exactly
          when the config has `num_segments`);
        - `run_saving_check`: `.keras` save/load in safe mode;
        - `run_saved_model_check`: a TF SavedModel endpoint reloaded without
          Keras gives the same outputs (TensorFlow backend only);
        - `run_precision_check`: finite outputs under mixed_float16 and
          mixed_bfloat16 with a fully padded row, the policy surviving a
          config round trip.

        A family with other inputs (the encoder-decoder Transformer) names
        the input whose [B, T] the sequence output follows
        (`sequence_input`) and its masks (`mask_inputs`, zeroed for the
        fully padded row); a single-tensor output is its `sequence_output`
        (pass `expected_output_shape` and switch off the checks of the
        encoder contract: TF Hub names, padding, type ids).
        """
        init_kwargs = tiny_encoder_config() if init_kwargs is None else init_kwargs
        if input_data is None:
            input_data = tiny_encoder_inputs(
                vocabulary_size=init_kwargs["vocabulary_size"]
            )
        if expected_output_shape is None:
            expected_output_shape = _encoder_output_shapes(init_kwargs, input_data)
        backbone = cls(**init_kwargs)
        output = backbone(input_data)
        shapes = keras.tree.map_structure(lambda x: tuple(x.shape), output)
        assert shapes == expected_output_shape, (
            f"{cls.__name__} outputs {shapes}, expected {expected_output_shape}"
        )
        self.run_serialization_test(backbone)
        _check_shorter_sequence(backbone, input_data, shapes, sequence_input)
        if run_contract_check:
            self.run_tf_hub_contract_test(backbone, output)
        if run_padding_check:
            self.run_padding_test(backbone, input_data, atol=padding_atol)
        if run_type_ids_check:
            self.run_type_ids_test(backbone, input_data)
        if run_saving_check:
            self.run_model_saving_test(backbone, input_data)
        if run_saved_model_check and keras.config.backend() == "tensorflow":
            self.run_saved_model_test(backbone, input_data)
        if run_precision_check:
            self.run_backbone_precision_test(cls, init_kwargs, input_data, mask_inputs)
        return backbone

    def run_backbone_precision_test(self, cls, init_kwargs, input_data,
                                    mask_inputs=("input_mask",)):
        """Finite outputs of `cls(**init_kwargs)` under mixed_float16 and
        mixed_bfloat16 on `input_data` with its last row fully padded (the
        `mask_inputs` zeroed), and the policy survives a config round trip."""
        padded = dict(input_data)
        for key in mask_inputs:
            padded[key] = np.array(input_data[key])
            padded[key][-1, :] = 0  # A row with nothing to attend.
        for policy in HALF_POLICIES:
            model = cls(**{**init_kwargs, "dtype": policy})
            self.assertAllFinite(model(padded), f"under {policy}")
            revived = cls.from_config(model.get_config())
            assert revived.dtype_policy.name == policy

    def run_tf_hub_contract_test(self, backbone, output):
        """The TF Hub names and dtypes of a backbone's inputs and outputs,
        and `encoder_outputs[-1]` is `sequence_output` (`output` is the
        backbone's output on some input)."""
        assert sorted(backbone.input) == list(BACKBONE_INPUTS), sorted(backbone.input)
        for name, tensor in backbone.input.items():
            assert tensor.dtype == "int32", f"{name} is {tensor.dtype}"
        assert sorted(backbone.output) == list(BACKBONE_OUTPUTS), sorted(backbone.output)
        assert sorted(output) == list(BACKBONE_OUTPUTS), sorted(output)
        self.assertAllClose(
            output["sequence_output"], output["encoder_outputs"][-1], atol=0
        )

    def run_padding_test(self, backbone, input_data, atol=1e-6):
        """In every partly padded row of `input_data`, new token ids at the
        padded positions leave `sequence_output` at the real positions and
        `pooled_output` unchanged within `atol`. The check bites: with those
        positions unmasked, the same new ids do move the row's real
        outputs or its pooled output (by more than 1e-4)."""
        mask = np.asarray(input_data["input_mask"])
        ids = np.asarray(input_data["input_word_ids"])
        rows = [i for i, row in enumerate(mask) if 0 < row.sum() < row.size]
        assert rows, "input_data has no partly padded row to check padding on"
        changed = ids.copy()
        vocabulary_size = backbone.get_config()["vocabulary_size"]
        changed[mask == 0] = (ids[mask == 0] + 7) % vocabulary_size
        unmasked = {**input_data, "input_mask": np.ones_like(mask)}

        def outputs(inputs, new_ids):
            out = backbone({**inputs, "input_word_ids": new_ids.astype(ids.dtype)})
            return _to_numpy({k: out[k] for k in ("sequence_output", "pooled_output")})

        for inputs, hidden in ((input_data, True), (unmasked, False)):
            base, after = outputs(inputs, ids), outputs(inputs, changed)
            for i in rows:
                real = mask[i] == 1
                seq = (base["sequence_output"][i][real], after["sequence_output"][i][real])
                pooled = (base["pooled_output"][i], after["pooled_output"][i])
                if hidden:
                    msg = f"the padding of row {i} reaches its"
                    self.assertAllClose(*seq, atol=atol, msg=f"{msg} real tokens")
                    self.assertAllClose(*pooled, atol=atol, msg=f"{msg} pooled_output")
                else:
                    moved = max(np.abs(a - b).max() for a, b in (seq, pooled))
                    assert moved > max(1e-4, 10 * atol), (
                        f"row {i}: unmasked, the new ids move nothing ({moved}); "
                        "the padding check would pass for any model"
                    )

    def run_type_ids_test(self, backbone, input_data):
        """A family with a segment table (`num_segments` in its config) reads
        `input_type_ids`: other ids move its outputs. One without (RoBERTa,
        DistilBERT, GPT) ignores them: every output stays exactly equal."""
        num_segments = backbone.get_config().get("num_segments")
        types = np.asarray(input_data["input_type_ids"])
        other = (types + 1) % num_segments if num_segments else np.ones_like(types)
        base = _to_numpy(backbone(input_data))
        after = _to_numpy(backbone({**input_data, "input_type_ids": other}))
        if num_segments:
            moved = np.abs(base["sequence_output"] - after["sequence_output"]).max()
            assert moved > 1e-4, f"{num_segments} segments, but type ids change nothing"
        else:
            self.assertAllClose(base, after, atol=0, rtol=0,
                                msg="no segment table, but type ids change outputs")

    # --- task models --------------------------------------------------------

    def run_task_test(
        self, task, input_data, labels, sample_weight=None, compile_kwargs=None,
        run_precision_check=True, atol=1e-6,
    ):
        """Checks a fine-tuning task model (TextClassifier, TokenClassifier,
        QuestionAnswerer, MultipleChoice, ...) on one batch, and returns the
        model reloaded from `.keras` (for the caller's own checks):

        - config round trip and registration (`run_serialization_test`);
        - `compile(**compile_kwargs)` (the task's defaults; eager unless
          `run_eagerly=False` is given) then one `fit` step: a finite loss,
          one optimizer update whose gradients reach the optimizer state
          (the first warm-up step may have a zero learning rate);
        - `.keras` save/load in safe mode: same outputs, same loss and
          optimizer config (schedule included), the optimizer state
          (iteration count, moments) restored exactly, and the reloaded
          model trains on with the same logs;
        - `run_precision_check`: under mixed_float16 and mixed_bfloat16 (the
          backbone's policy, which the task follows) the config keeps the
          policy, compile wraps the optimizer in a LossScaleOptimizer only
          under mixed_float16, and with the last example fully padded the
          outputs are float32 and finite, and so are a `fit` step's loss
          and the weights after it.
        """
        compile_kwargs = {"run_eagerly": True, **(compile_kwargs or {})}
        cls = type(task)
        self.run_serialization_test(task)
        batch_size = len(np.asarray(input_data["input_word_ids"]))
        fit_kwargs = dict(sample_weight=sample_weight, batch_size=batch_size, verbose=0)
        task.compile(**compile_kwargs)
        logs = task.fit(input_data, labels, **fit_kwargs).history
        self.assertAllFinite(logs["loss"], "loss after one fit step")
        assert int(task.optimizer.iterations) == 1
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "task.keras")
            task.save(path)
            restored = keras.saving.load_model(path, safe_mode=True)
        assert type(restored) is cls
        self.assertAllClose(task(input_data), restored(input_data), atol=atol)
        self._check_restored_training_state(task, restored)
        again = restored.fit(input_data, labels, **fit_kwargs).history
        assert int(restored.optimizer.iterations) == 2
        assert set(again) == set(logs), (sorted(again), sorted(logs))
        self.assertAllFinite(again["loss"], "loss after reloading")
        if run_precision_check:
            self.run_task_precision_test(
                task, input_data, labels, fit_kwargs, compile_kwargs
            )
        return restored

    def _check_restored_training_state(self, task, restored):
        """`restored` (a `.keras` reload of the trained `task`) has the same
        loss and optimizer config, and the optimizer's variables (iteration
        count, non-zero moments) restored exactly."""
        assert restored.optimizer is not None, "the optimizer was not restored"
        assert restored.optimizer.get_config() == task.optimizer.get_config()
        assert keras.saving.serialize_keras_object(restored.loss) == (
            keras.saving.serialize_keras_object(task.loss)
        )
        state = _to_numpy(task.optimizer.variables)
        assert [v.path for v in restored.optimizer.variables] == [
            v.path for v in task.optimizer.variables
        ]
        self.assertAllClose(state, restored.optimizer.variables, atol=0, rtol=0)
        moments = [
            x for x, v in zip(state, task.optimizer.variables)
            if "iteration" not in v.path
        ]
        assert any(np.any(x != 0) for x in moments), "no optimizer state to restore"

    def run_task_precision_test(
        self, task, input_data, labels, fit_kwargs, compile_kwargs
    ):
        """`task` rebuilt under each half-precision policy (see
        `run_task_test`)."""
        padded = dict(input_data)
        padded["input_mask"] = np.array(input_data["input_mask"])
        padded["input_mask"][-1] = 0  # An example with nothing to attend.
        backbone_config = task.backbone.get_config()
        for policy in HALF_POLICIES:
            backbone = type(task.backbone).from_config(
                {**backbone_config, "dtype": policy}
            )
            half = type(task).from_config(
                {**task.get_config(), "backbone": backbone, "dtype": None}
            )
            assert half.dtype_policy.name == policy
            revived = type(half).from_config(half.get_config())
            assert revived.dtype_policy.name == policy
            half.compile(**compile_kwargs)
            scaled = isinstance(half.optimizer, keras.optimizers.LossScaleOptimizer)
            assert scaled == (policy == "mixed_float16"), (policy, half.optimizer)
            output = half(padded)
            for x in keras.tree.flatten(output):
                assert x.dtype == "float32", f"{x.dtype} output under {policy}"
            self.assertAllFinite(output, f"under {policy}")
            logs = half.fit(padded, labels, **fit_kwargs).history
            self.assertAllFinite(logs["loss"], f"loss under {policy}")
            self.assertAllFinite(half.trainable_weights, f"weights under {policy}")

    def run_model_saving_test(self, model, input_data, atol=1e-6):
        """`.keras` save then load (safe mode) gives identical outputs."""
        expected = model(input_data)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "round_trip.keras")
            model.save(path)
            restored = keras.saving.load_model(path, safe_mode=True)
        assert type(restored) is type(model)
        self.assertAllClose(expected, restored(input_data), atol=atol)
        return restored

    def run_saved_model_test(self, model, input_data, atol=1e-5):
        """Exports a TF SavedModel and checks that the reloaded endpoint, run
        without any Keras object, gives the same outputs. List outputs (such
        as `encoder_outputs`) are flattened to `name_0, name_1, ...` because
        signatures only carry flat dicts. TensorFlow backend only."""
        import tensorflow as tf

        def flat_dict(outputs):
            if not isinstance(outputs, dict):  # one tensor (a seq2seq backbone)
                return {"output": outputs}
            flat = {}
            for key, value in outputs.items():
                if isinstance(value, (list, tuple)):
                    flat.update({f"{key}_{i}": v for i, v in enumerate(value)})
                else:
                    flat[key] = value
            return flat

        specs = {
            k: tf.TensorSpec((None,) * np.ndim(v), tf.as_dtype(np.asarray(v).dtype), k)
            for k, v in input_data.items()
        }
        archive = keras.export.ExportArchive()
        archive.track(model)
        archive.add_endpoint(
            "serve", lambda inputs: flat_dict(model(inputs)), input_signature=[specs]
        )
        expected = flat_dict(model(input_data))
        with tempfile.TemporaryDirectory() as tmp:
            archive.write_out(tmp, verbose=False)
            reloaded = tf.saved_model.load(tmp)
            actual = reloaded.serve(
                {k: tf.convert_to_tensor(v) for k, v in input_data.items()}
            )
        self.assertAllClose(expected, dict(actual), atol=atol)
        return actual


def _encoder_output_shapes(init_kwargs, input_data):
    """The encoder contract's output shapes for a config and its inputs:
    sequence_output [B, T, H], pooled_output [B, H], encoder_outputs
    num_layers x [B, T, H]."""
    batch, length = np.shape(input_data["input_word_ids"])
    hidden = init_kwargs["hidden_dim"]
    return {
        "sequence_output": (batch, length, hidden),
        "pooled_output": (batch, hidden),
        "encoder_outputs": [(batch, length, hidden)] * init_kwargs["num_layers"],
    }


def _check_shorter_sequence(backbone, input_data, shapes, sequence_input):
    """A built backbone takes inputs half as long without rebuilding
    (positions are sliced); its sequence output follows `sequence_input`'s
    [B, T/2] with the width of `shapes` (the full-length output shapes)."""
    short = {k: v[:, : max(1, v.shape[1] // 2)] for k, v in input_data.items()}
    short_output = backbone(short)
    if isinstance(short_output, dict):
        short_output, width = short_output["sequence_output"], shapes["sequence_output"][-1:]
    else:
        width = shapes[-1:]
    assert tuple(short_output.shape) == short[sequence_input].shape + width
