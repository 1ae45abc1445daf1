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

HALF_POLICIES = ("mixed_float16", "mixed_bfloat16")


def _to_numpy(tree):
    return keras.tree.map_structure(lambda x: np.asarray(ops.convert_to_numpy(x)), tree)


def _call(obj, inputs, **kwargs):
    """Calls with a tuple as positional arguments, anything else as one."""
    if isinstance(inputs, tuple):
        return obj(*inputs, **kwargs)
    return obj(inputs, **kwargs)


class TestCase:
    """Base class for pytest test classes (no unittest machinery needed)."""

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
        self,
        cls,
        init_kwargs,
        input_data,
        expected_output_shape,
        run_saving_check=True,
        run_precision_check=True,
    ):
        """Checks a backbone: output shapes (every output key), config round
        trip, `.keras` save/load, half precision (including a fully padded
        row) and variable sequence length."""
        backbone = cls(**init_kwargs)
        output = backbone(input_data)
        shapes = keras.tree.map_structure(lambda x: tuple(x.shape), output)
        assert shapes == expected_output_shape, (
            f"{cls.__name__} outputs {shapes}, expected {expected_output_shape}"
        )
        self.run_serialization_test(backbone)
        # Shorter sequences work without rebuilding (positions are sliced).
        short = {k: v[:, : max(1, v.shape[1] // 2)] for k, v in input_data.items()}
        backbone(short)
        if run_saving_check:
            self.run_model_saving_test(backbone, input_data)
        if run_precision_check:
            padded = dict(input_data)
            padded["input_mask"] = np.array(input_data["input_mask"])
            padded["input_mask"][-1, :] = 0  # A row with nothing to attend.
            for policy in HALF_POLICIES:
                model = cls(**{**init_kwargs, "dtype": policy})
                self.assertAllFinite(model(padded), f"under {policy}")
                # The policy survives a config round trip.
                revived = cls.from_config(model.get_config())
                assert revived.dtype_policy.name == policy
        return backbone

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
