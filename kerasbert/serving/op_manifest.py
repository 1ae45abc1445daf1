"""`assets.extra/ops.json`: the custom (non-core TensorFlow) ops a SavedModel
uses, so a deployment can check its TF Serving build registers them.

TF Serving links a fixed tensorflow-text; an op added in a newer
tensorflow-text fails the model's load there with "Op type not registered".
Core ops are the ones TensorFlow itself generates wrappers for
(`tf.raw_ops`); everything else in the graph came from a custom-op library.
"""

import json
import os

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

MANIFEST = os.path.join("assets.extra", "ops.json")


def graph_op_types(saved_model_dir):
    """Every op type in the SavedModel's graph and its function library."""
    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    ops = set()
    for meta_graph in proto.meta_graphs:
        graph = meta_graph.graph_def
        ops.update(node.op for node in graph.node)
        functions = {function.signature.name for function in graph.library.function}
        for function in graph.library.function:
            ops.update(node.op for node in function.node_def)
        ops -= functions  # calls of library functions are not ops
    return ops


def custom_ops(saved_model_dir):
    """Sorted op types that core TensorFlow does not define."""
    return sorted(op for op in graph_op_types(saved_model_dir) if not hasattr(tf.raw_ops, op))


def write_manifest(saved_model_dir):
    """Writes `assets.extra/ops.json` into the SavedModel; returns its dict."""
    import tensorflow_text

    manifest = {
        "custom_ops": custom_ops(saved_model_dir),
        "library": "tensorflow-text",
        "tensorflow_text_version": tensorflow_text.__version__,
        "tensorflow_version": tf.__version__,
        "note": "TF Serving must link a tensorflow-text that registers every op in custom_ops "
                "(TF Serving 2.20 links tensorflow-text 2.20).",
    }
    path = os.path.join(saved_model_dir, MANIFEST)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest
