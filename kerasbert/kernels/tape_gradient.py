"""A custom gradient that TensorFlow forgets with the tape.

`tf.custom_gradient` (and `keras.ops.custom_gradient`, which is it under
TensorFlow) registers every traced call's gradient function in TensorFlow's
process-wide gradient registry, under a new name, for good. That function
holds the call's tensors, so every graph traced with a custom gradient stays
alive for the life of the process, with the variables it captured
(tensorflow/tensorflow#27492, #97697): building and fitting
all-MiniLM-L6-v2 four times in one process left it at 2.0, 2.2, 2.7 and
3.1 GB, where the same models with Keras's GELU (no custom gradient) stayed
at 1.9-2.0 GB, and with these gradients on the tape 1.8-1.9 GB. Notebooks and
benchmarks that build several models paid it.

`custom_gradient` records the gradient on the tapes that are watching (what
`tf.GradientTape`, and so Keras's `fit`, differentiates with) and nowhere
else: it goes when the tape goes. A gradient taken without a tape (inside
a `while` loop's body, `tf.gradients`) differentiates the forward pass
instead: the same values, computed by TensorFlow's own gradients. Other
backends get `keras.ops.custom_gradient`, which keeps nothing.
"""

import functools
import importlib

import keras


def custom_gradient(fn):
    """Decorator: `fn(*tensors) -> (outputs, grad)`, with `grad(*upstream)`
    returning one gradient (or None) per input tensor, as for
    `keras.ops.custom_gradient`. Inputs are tensors only (no variables read
    inside `fn`); outputs a tensor or a flat list of them."""
    if keras.config.backend() != "tensorflow":
        return keras.ops.custom_gradient(fn)

    @functools.wraps(fn)
    def wrapped(*args):
        import tensorflow as tf

        try:  # the tape API tf.custom_gradient itself records with
            record = importlib.import_module("tensorflow.python.eager.record")
        except ImportError:  # a TensorFlow that moved it: its own, which keeps graphs
            return tf.custom_gradient(fn)(*args)
        args = [tf.convert_to_tensor(a) for a in args]
        with record.stop_recording():
            outputs, grad = fn(*args)
            # Fresh tensors: the tapes learn them from this record only.
            flat = [tf.identity(t) for t in tf.nest.flatten(outputs)]

        def backward(*upstream):
            grads = grad(*upstream)
            return list(grads) if isinstance(grads, (list, tuple)) else [grads]

        record.record_operation(fn.__name__, flat, args, backward)
        return tf.nest.pack_sequence_as(outputs, flat)

    return wrapped
