"""`Task.fit` under MultiWorkerMirroredStrategy. Keras 3.15's TensorFlow
trainer cannot `fit` under MWMS by itself (keras-team/keras#20329,
tensorflow/tensorflow#72388); these functions, called from the Task's
Keras hooks, fix it. Each takes the model.
"""

import keras
from keras import ops


def across_workers(model):
    """Whether `model` runs under MultiWorkerMirroredStrategy with several
    workers (Keras' own test, TensorFlow backend only)."""
    if keras.backend.backend() != "tensorflow":
        return False
    import tensorflow as tf  # lazy: only under the TensorFlow backend

    strategy = model.distribute_strategy
    return (isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
            and strategy.extended._in_multi_worker_mode())


def symbolic_build_inputs(model, iterator, data_batch):
    """(iterator, data_batch) for `Model._maybe_symbolic_build`."""
    if iterator is not None and getattr(model, "_repeated_input", False) \
            and model._distribute_strategy is not None:
        # Under a strategy Keras builds from the first batch of the
        # epoch iterator, whose one iterator lives on over a repeated
        # dataset (`raw_text_fit.one_iterator`): training would start at its
        # second batch. A fresh iterator's first batch builds it instead, as
        # when every epoch starts its own.
        iterator = [(0, 0, iter(iterator._get_iterator()))]
    # Keras MEAN-reduces the first batch across the replicas only to learn
    # its shapes; across workers that reduce refuses a dict of features.
    # One local replica's batch has the same shapes and dtypes.
    if iterator is not None and across_workers(model):
        for _, _, batches in iterator:
            batch = next(batches)
            break
        local = model.distribute_strategy.experimental_local_results
        data_batch, iterator = keras.tree.map_structure(lambda v: local(v)[0], batch), None
    return iterator, data_batch


def worker_logs(model, logs):
    """A step's logs, each value given a leading axis across workers:
    Keras then reduces them with MEAN over axis 0, which a scalar loss or
    metric lacks."""
    if not across_workers(model):
        return logs
    return keras.tree.map_structure(lambda v: ops.expand_dims(v, 0), logs)
