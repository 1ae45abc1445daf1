"""`assets.extra/tf_serving_warmup_requests`: requests TF Serving replays
when it loads a version, so the first real request does not pay for graph
initialisation. A failing warm-up request fails the version's load, which
is why the edge cases are in there: a model that cannot take them never
goes live.

Format: a TFRecord file of `tensorflow.serving.PredictionLog` protos (at
most 1000), each a `PredictRequest` for one signature.
"""

import os

import numpy as np
import tensorflow as tf

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
MAX_RECORDS = 1000


def predict_log(model_name, signature_name, inputs):
    """One PredictionLog record: {input name: array-like} -> bytes."""
    from tensorflow_serving.apis import model_pb2
    from tensorflow_serving.apis import predict_pb2
    from tensorflow_serving.apis import prediction_log_pb2

    request = predict_pb2.PredictRequest(
        model_spec=model_pb2.ModelSpec(name=model_name, signature_name=signature_name)
    )
    for name, value in inputs.items():
        array = np.asarray(value, dtype=object if _is_text(value) else None)
        request.inputs[name].CopyFrom(tf.make_tensor_proto(array))
    log = prediction_log_pb2.PredictionLog(
        predict_log=prediction_log_pb2.PredictLog(request=request)
    )
    return log.SerializeToString()


def _is_text(value):
    flat = np.asarray(value, dtype=object).reshape(-1)
    return len(flat) > 0 and isinstance(flat[0], (str, bytes))


def write_warmup(saved_model_dir, model_name, requests):
    """Writes the warm-up file.

    Args:
        saved_model_dir: the version directory.
        model_name: the name TF Serving serves the model under.
        requests: list of (signature name, {input name: array-like}).

    Returns:
        the file's path.
    """
    if len(requests) > MAX_RECORDS:
        raise ValueError(f"{len(requests)} warm-up requests; TF Serving reads at most {MAX_RECORDS}.")
    path = os.path.join(saved_model_dir, WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for signature_name, inputs in requests:
            writer.write(predict_log(model_name, signature_name, inputs))
    return path


def read_warmup(path):
    """The PredictRequests of a warm-up file, as (signature name, {input name:
    numpy array}) pairs."""
    from tensorflow_serving.apis import prediction_log_pb2

    requests = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        log = prediction_log_pb2.PredictionLog.FromString(record)
        request = log.predict_log.request
        inputs = {name: tf.make_ndarray(proto) for name, proto in request.inputs.items()}
        requests.append((request.model_spec.signature_name, inputs))
    return requests
