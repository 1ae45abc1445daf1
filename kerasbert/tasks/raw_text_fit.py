"""Raw text in `Task.fit`, `evaluate` and `predict`: lists or arrays of
strings (or `tf.data` datasets of them) turned into batched datasets of
token-id features by the task's preprocessor, in `tf.data`, never in the
compiled step. `Task` delegates to these functions; each takes the task.

    fit_inputs         raw x / validation_data -> datasets; a finite
                       dataset repeated once (`one_iterator`)
    raw_dataset        raw x, y, sample weights -> batches
    predict_raw        raw x -> decoded outputs, in input order
    padded_outputs,    predict's per-token outputs [B, L, ...] made
    dense_outputs      stackable ([B, T, ...])
"""

import contextlib
import keras
import numpy as np

from kerasbert.errors import TaskDataError
from kerasbert.errors import DATA_ERROR
from kerasbert.errors import UsageError
from kerasbert.tasks.multi_worker import across_workers
from kerasbert.tasks.row_order import length_order
from kerasbert.tasks.row_order import pad_axis_1
from kerasbert.tasks.row_order import take_rows

#: the logit padded rows get: far below any real logit, so never chosen.
PAD_LOGIT = -1e4


def looks_like_text(x):
    """Strings where token ids were expected (no TensorFlow needed)."""
    while isinstance(x, (list, tuple)) and x:
        x = x[0]
    if isinstance(x, (str, bytes)):
        return True
    dtype = getattr(x, "dtype", None)
    return dtype is not None and (getattr(dtype, "kind", "") in "USO"
                                  or str(dtype) == "<dtype: 'string'>")


def refuse_empty(x, call):
    """Refuses an empty list, tuple or array (or a tuple of empty ones, a
    text pair) before Keras sees it: it would end in "pop from an empty
    set", naming nothing.

    Raises:
        TaskDataError: naming the call.
    """
    parts = x if isinstance(x, tuple) and x and all(
        isinstance(p, (list, tuple)) or hasattr(p, "shape") for p in x) else (x,)
    for part in parts:
        size = len(part) if isinstance(part, (list, tuple)) else (
            getattr(part, "shape", (None,)) or (None,))[0]
        if size == 0:
            raise TaskDataError(f"{call}() got no examples: x is empty.")


@contextlib.contextmanager
def data_errors():
    """Turns a failed graph assertion on the data (`DATA_ERROR`: a
    `tf.data` dataset's label outside the label set) into one
    `TaskDataError` line, as a list of the same examples gets; any other
    error passes unchanged."""
    import tensorflow as tf  # lazy: only where a dataset runs

    try:
        yield
    except tf.errors.InvalidArgumentError as err:
        text = " ".join(str(err.message).split())
        if DATA_ERROR not in text:
            raise
        detail = text.split(DATA_ERROR, 1)[1]
        detail = detail.split(" [[", 1)[0].replace("] [", " ").replace("\\'", "'")
        detail = detail.strip(" []")
        raise TaskDataError(detail) from None


def is_dataset(x):
    """A `tf.data.Dataset` (without importing TensorFlow for other inputs)."""
    return type(x).__module__.startswith("tensorflow.") and hasattr(x, "element_spec")


def batches_per_epoch(x, y, batch_size):
    """Batches in one pass over `x` (a finite dataset, or arrays), or None."""
    import tensorflow as tf  # lazy: only for datasets

    if isinstance(x, tf.data.Dataset):
        count = int(x.cardinality())
        return count if count > 0 else None
    if isinstance(x, dict) and x:
        x = next(iter(x.values()))
    length = getattr(x, "shape", None)
    if length is None or not length:
        return None
    return -(-int(length[0]) // int(batch_size or 32))


def is_raw(task, x):
    """Whether `x` is raw input for `task` (then it needs the preprocessor);
    raw text given to a task without one is a UsageError."""
    if task.preprocessor is not None:
        return task.preprocessor.is_raw(x)
    if not isinstance(x, dict) and looks_like_text(x):
        raise UsageError(
            f"This {type(task).__name__} has no preprocessor, so it takes token-id dicts "
            "only: build it with from_preset(handle) (or tokenizer=...), or load a .keras "
            "file saved with one.")
    return False


def raw_dataset(task, x, y=None, sample_weight=None, batch_size=None, shuffle=False,
                seed=None):
    """The preprocessor's batched dataset of (features, labels, weights)."""
    return task.preprocessor.dataset(x, y, sample_weight, batch_size=batch_size,
                                     shuffle=shuffle, seed=seed,
                                     num_labels=task.num_label_names(),
                                     fixed_shapes=task.needs_fixed_shapes())


def fit_inputs(task, x, y, batch_size, epochs, validation_data, shuffle, sample_weight, seed,
               kwargs):
    """`keras.Model.fit`'s (x, y, batch_size, validation_data, shuffle,
    sample_weight) for raw or dataset inputs; `kwargs` (fit's other
    arguments) gains the steps per epoch of a repeated dataset."""
    if is_raw(task, x):
        if kwargs.get("validation_split"):
            raise UsageError("validation_split does not apply to raw text: give "
                             "validation_data=(x, y).")
        batch_size = batch_size or task.default_batch_size()
        if seed is None and across_workers(task):
            # Each worker runs the whole pipeline and keeps its shard of
            # every batch: they must all shuffle alike.
            seed = 0
        x = raw_dataset(task, x, y, sample_weight, batch_size, shuffle, seed)
        y = sample_weight = None
    if validation_data is not None:
        validation_data = raw_validation(task, validation_data, batch_size)
        if is_dataset(validation_data):
            validation_data = one_iterator(task, validation_data, epochs, kwargs,
                                           "validation_steps")
    if is_dataset(x):
        # It batches and shuffles itself (Keras warns when told to shuffle it).
        batch_size, shuffle = None, False
        x = one_iterator(task, x, epochs, kwargs, "steps_per_epoch")
    return x, y, batch_size, validation_data, shuffle, sample_weight


def one_iterator(task, dataset, epochs, kwargs, steps):
    """A dataset of known length repeated, its batches per epoch given
    as `kwargs[steps]`: Keras then keeps one iterator for every epoch
    instead of starting one (two, for a dataset of known length) per
    epoch, which for raw text costs the tokenizer's graph (QA: and the
    windows') each time, a few tenths of a second. Each pass is one
    epoch of the same batches; a seeded `shuffle` gives pass k the
    order its k-th iterator gives, so raw text and its cached features
    still train alike. Left as it is when the caller gave
    `kwargs[steps]` or one epoch runs. Marks the task's input repeated
    (`multi_worker.symbolic_build_inputs` reads it)."""
    count = int(dataset.cardinality())
    if kwargs.get(steps) is not None or count <= 0 \
            or int(epochs) - int(kwargs.get("initial_epoch", 0)) < 2:
        return dataset
    kwargs[steps] = count
    task._repeated_input = True
    return dataset.repeat()


def raw_validation(task, data, batch_size):
    """`validation_data` as batches when raw: `(x, y)` or `x` alone."""
    if isinstance(data, tuple) and data and is_raw(task, data[0]):
        x, y = data[0], data[1] if len(data) > 1 else None
        return raw_dataset(task, x, y, None, batch_size or task.default_batch_size())
    if not isinstance(data, tuple) and is_raw(task, data):
        return raw_dataset(task, data, batch_size=batch_size or task.default_batch_size())
    return data


def predict_raw(task, x, batch_size, predict, **predict_arguments):
    """The decoded outputs for raw `x` (`predict`: Keras' own predict of
    the task). Raw lists run in the order of their pieces (short rows
    batched together, so the batches' padding is small; counting them costs
    one tokenizer call, 25 ms for 4,990 sentences whose predict took 21 s)
    and come back in input order."""
    order = None if predict_arguments.get("steps") is not None or task.needs_fixed_shapes() \
        or task.preprocessor.padding != "longest" else length_order(
            x, task.preprocessor.piece_counts)
    if order is not None:
        x = take_rows(x, order)
    dataset, context = task.preprocessor.predict_dataset(
        x, batch_size or task.default_batch_size(), fixed_shapes=task.needs_fixed_shapes())
    outputs = predict(dataset, **predict_arguments)
    result = task.preprocessor.postprocess(dense_outputs(task, outputs), context)
    return result if order is None else take_rows(result, np.argsort(order))


def padded_outputs(task, outputs):
    """Per-token outputs of a batch cut to its longest row [B, L, ...]
    padded back to T, so predict can stack the batches."""
    length = getattr(task.preprocessor, "sequence_length", None)
    if not task.per_token_outputs or not length:
        return outputs
    return keras.tree.map_structure(lambda t: pad_axis_1(t, int(length), PAD_LOGIT), outputs)


def dense_outputs(task, outputs):
    """TensorFlow's predict stacks outputs of different lengths as
    ragged tensors (a model without a preprocessor has no T to pad
    to in `predict_step`): padded to the longest here."""
    def dense(value):
        if hasattr(value, "to_tensor") and hasattr(value, "row_splits"):
            return np.asarray(value.to_tensor(default_value=PAD_LOGIT))
        return value
    return keras.tree.map_structure(dense, outputs) if task.per_token_outputs else outputs
