"""`TaskPreprocessor`: raw task inputs -> model features, inside a task model.

A task model (`kerasbert.tasks.TextClassifier`, ...) built from a handle, a
run directory or a tokenizer carries one of these as `model.preprocessor`.
It holds the tokenizer (tensorflow-text ops, `kerasbert.text`), the packer
of its family, the packed length T and the label vocabulary, and it is what
lets `fit`, `evaluate` and `predict` take raw text:

    model.fit(x=texts, y=labels)        # -> preprocessor.dataset(texts, labels)
      tf.data: slices -> shuffle -> batch -> map(preprocess, parallel) -> prefetch

Tokenization runs in that `tf.data` map, on batches, never inside the
compiled train step, so the same model trains under every Keras backend.
The packed features are exactly those of the CLI's features path
(`kerasbert.data.finetuning`): the same tokenizer, the same packer, the same
label ids.

Saving: `get_config` keeps the tokenizer's description
(`kerasbert.text.describe_tokenizer`: family, casing, switches) and the
tokenizer's files travel as the layer's assets inside the `.keras` archive
(`save_assets` / `load_assets`), so `keras.saving.load_model("x.keras")`
predicts from strings in another process and folder.

Subclasses (one per example kind of `kerasbert.data.finetuning.task_formats`)
define `slices` (Python inputs -> tensors), `preprocess` (a batch of raw
tensors -> features) and `postprocess` (model outputs -> what `predict`
returns).
"""

import atexit
import json
import os
import shutil
import tempfile

import numpy as np
import keras
import tensorflow as tf

from kerasbert.data.finetuning.convert import convert_examples
from kerasbert.data.finetuning.examples import infer_label_names
from kerasbert.data.finetuning.examples import label_id
from kerasbert.data.finetuning.padding import DEFAULT_MULTIPLE
from kerasbert.data.finetuning.padding import bucket_batches
from kerasbert.data.finetuning.padding import check_padding
from kerasbert.data.finetuning.padding import trim_element
from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.errors import DATA_ERROR
from kerasbert.errors import UsageError
from kerasbert.text import describe_tokenizer
from kerasbert.text import load_saved_tokenizer
from kerasbert.text import make_packer
from kerasbert.text import save_tokenizer_files



def clean_text(texts):
    """Any bytes made valid UTF-8: invalid sequences become U+FFFD, which
    every tokenizer drops. The same op runs in training and in the exported
    graph (`kerasbert.serving`), so both see the same ids."""
    return tf.strings.unicode_transcode(
        texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )


def is_text(value):
    """True for a str/bytes, or a (nested) list/tuple/array whose first leaf is one."""
    while True:
        if isinstance(value, (str, bytes)):
            return True
        if isinstance(value, np.ndarray):
            return value.dtype.kind in "USO" and (value.size == 0 or is_text(value.flat[0]))
        if isinstance(value, (list, tuple)) and value:
            value = value[0]
            continue
        if isinstance(value, (tf.Tensor, tf.RaggedTensor)):
            return value.dtype == tf.string
        return False


def has_strings(spec):
    """True when a `tf.data` element spec holds a tf.string component."""
    return any(getattr(s, "dtype", None) == tf.string for s in tf.nest.flatten(spec))


def _persistent_copy(directory):
    """A copy of an assets folder that outlives it: Keras deletes the folder
    it extracts a `.keras` archive into once loading ends, and the
    tokenizer keeps its file paths (an export copies them)."""
    target = tempfile.mkdtemp(prefix="kerasbert-tokenizer-")
    atexit.register(shutil.rmtree, target, ignore_errors=True)
    for name in os.listdir(directory):
        shutil.copyfile(os.path.join(directory, name), os.path.join(target, name))
    return target


class TaskPreprocessor(keras.layers.Layer):
    """Base class: a tokenizer, a packed length and a label vocabulary.

    Args:
        tokenizer: a `kerasbert.text` tokenizer (WordPiece, SentencePiece,
            byte-level BPE); from a saved config, its description (the
            files then arrive through `load_assets`).
        sequence_length: T, the packed length (default: the task type's,
            `kerasbert.preprocessing.lengths.default_sequence_length`).
        label_names: class or tag names in id order; None to take them
            from the first labelled data as sorted distinct strings
            (`infer_label_names`), or for tasks without names.
        task_type: the fine-tuning task type this preprocessor packs for
            (`kerasbert.data.finetuning.task_formats`); subclasses know
            which ones they take.
        padding: "longest" (default): each batch of `dataset` is cut to
            its longest row rounded up to `pad_to_multiple_of`, at most T
            (`kerasbert.data.finetuning.padding`); "max_length": every
            batch at T. The task model keeps T where its compiled step
            needs one shape (XLA, TPU, steps_per_execution > 1).
        pad_to_multiple_of: the finest rounding of "longest" (8): a
            longest row L is rounded up to a multiple of it up to 16 of
            them, then to a step that doubles with each doubling of L
            (`padding.padded_width`); `padding.shape_bound(T)` shapes at
            most reach the compiled step (16 at T = 128, 28 at 384).
        bucket_by_length: `fit` groups examples of similar length into
            batches (seeded pools, `bucket_batches`). `predict` on lists
            always runs in length order and gives rows back in input
            order.

    Example:

    >>> from kerasbert.preprocessing import TextClassifierPreprocessor
    >>> from kerasbert.text import ByteTokenizer
    >>> preprocessor = TextClassifierPreprocessor(ByteTokenizer(), sequence_length=8)
    >>> print(preprocessor.label_names)                      # taken from the first labels
    None
    >>> x, y = next(iter(preprocessor.dataset(["good", "bad"], ["pos", "neg"], batch_size=2)))
    >>> preprocessor.label_names, y.numpy().tolist()         # sorted names, ids [B]
    (['neg', 'pos'], [1, 0])
    >>> x["input_word_ids"].numpy()[1].tolist()              # </s> b a d </s>: bytes + 2
    [1, 100, 99, 102, 1, 0, 0, 0]
    """

    #: the task types a subclass takes; the first is its default.
    task_types = ()
    #: its own constructor options, which `Task.from_preset` passes on.
    options = ()
    #: the batching options every preprocessor takes, which `Task.from_preset`
    #: passes on too (`TextClassifier.from_preset(DIR, bucket_by_length=True)`).
    batch_options = ("padding", "pad_to_multiple_of", "bucket_by_length")

    def __init__(self, tokenizer=None, sequence_length=None, label_names=None, task_type=None,
                 padding="longest", pad_to_multiple_of=DEFAULT_MULTIPLE, bucket_by_length=False,
                 **kwargs):
        kwargs.setdefault("trainable", False)
        super().__init__(**kwargs)
        check_padding(padding, pad_to_multiple_of)
        self.padding = padding
        self.pad_to_multiple_of = int(pad_to_multiple_of)
        self.bucket_by_length = bool(bucket_by_length)
        task_type = task_type or self.task_types[0]
        # Any registered task type whose examples are of this kind (a new
        # type of text classification needs no preprocessor of its own).
        if task_format(task_type).example != task_format(self.task_types[0]).example:
            raise ValueError(f"{type(self).__name__} packs {task_format(self.task_types[0]).example} "
                             f"examples, not those of {task_type!r}.")
        self.task_type = task_type
        self.sequence_length = int(sequence_length or self.format.sequence_length)
        # Plain strings: Keras' TensorFlow tracking would wrap lists and dicts.
        self._names_json = json.dumps(None if label_names is None
                                      else [str(n) for n in label_names])
        if isinstance(tokenizer, dict):  # from a saved config: files come with load_assets
            self._description_json, self._tokenizer = json.dumps(tokenizer), None
        else:
            self._description_json = json.dumps(
                None if tokenizer is None else describe_tokenizer(tokenizer))
            self._tokenizer = tokenizer
        self._packer = None
        self.built = True

    # --- what it holds -----------------------------------------------------

    @property
    def format(self):
        """The task type's data facts (`TaskFormat`)."""
        return task_format(self.task_type)

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            raise UsageError(
                f"{type(self).__name__} has no tokenizer: build the task with from_preset(handle) "
                "or give it one (preprocessor=...), or load the model with keras.saving.load_model, "
                "which restores it from the archive.")
        return self._tokenizer

    @property
    def packer(self):
        """The family's packer at T (`kerasbert.text.make_packer`)."""
        if self._packer is None:
            self._packer = make_packer(self.tokenizer, self.sequence_length)
        return self._packer

    @property
    def label_names(self):
        return json.loads(self._names_json)

    @property
    def description(self):
        """The tokenizer's description (`describe_tokenizer`), or None."""
        return json.loads(self._description_json)

    def set_label_names(self, names, num_labels=None):
        """Fixes the label vocabulary (once); checks it against the head's size."""
        names = [str(n) for n in names]
        if num_labels is not None and len(names) != int(num_labels):
            raise UsageError(f"The labels name {len(names)} classes ({', '.join(names[:10])}"
                             f"{', ...' if len(names) > 10 else ''}) but the model's head has "
                             f"{num_labels}: build it with label_names=[...] or "
                             f"{len(names)} outputs.")
        if len(set(names)) != len(names):
            raise UsageError(f"Repeated label names: {names}.")
        self._names_json = json.dumps(names)

    def label_ids(self, labels, num_labels=None, where="label"):
        """Python / NumPy labels (names or ids) -> int32 ids, checked
        against the label vocabulary, which string labels create when the
        model has none yet. A label outside it is a `UsageError` naming
        the example."""
        labels = [x.decode("utf-8") if isinstance(x, bytes) else x for x in labels]
        if self.label_names is None:
            if any(isinstance(x, str) for x in labels):
                self.set_label_names(infer_label_names(labels), num_labels)
            else:
                count = int(num_labels) if num_labels is not None else int(max(labels)) + 1
                self.set_label_names([str(i) for i in range(count)])
        names = self.label_names
        return np.asarray([label_id(x, names, f"{where} {i}") for i, x in enumerate(labels)],
                          np.int32)

    def label_table(self):
        """A string -> id lookup for labels that come as strings from a
        `tf.data` dataset (-1 when unknown; `check_label_ids` refuses it)."""
        names = tf.constant(self.label_names, tf.string)
        return tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(names, tf.range(tf.size(names), dtype=tf.int32)),
            default_value=-1)

    def graph_label_ids(self, labels):
        """Labels inside `tf.data` (strings or ints) -> int32 ids, each
        asserted to be in the label set."""
        checks = []
        if labels.dtype == tf.string:
            if self.label_names is None:
                raise UsageError("String labels in a tf.data dataset need the label vocabulary "
                                 "first: build the task with label_names=[...].")
            ids = self.label_table().lookup(labels)
            # The unknown labels themselves, in the message `fit` turns into
            # a TaskDataError (`raw_text_fit.data_errors`).
            shown = ", ".join(repr(name) for name in self.label_names[:8])
            checks.append(tf.debugging.Assert(
                tf.reduce_all(ids >= 0),
                [f"{DATA_ERROR} a label of the dataset is not in the label set [{shown}]:",
                 tf.boolean_mask(labels, ids < 0)], summarize=3))
        else:
            ids = tf.cast(labels, tf.int32)
        size = len(self.label_names) if self.label_names else None
        checks.append(tf.debugging.assert_non_negative(
            ids, message=f"{DATA_ERROR} a label is not in the label set"))
        if size:
            checks.append(tf.debugging.assert_less(
                ids, size, message=f"{DATA_ERROR} a label id is past the label set of {size}"))
        with tf.control_dependencies(checks):
            return tf.identity(ids)

    # --- raw inputs -> tf.data ---------------------------------------------

    def is_raw(self, x):
        """Whether `x` is raw input this preprocessor turns into features
        (strings in Python, NumPy or a `tf.data.Dataset`), as opposed to
        the token-id dicts every task model also takes."""
        if isinstance(x, tf.data.Dataset):
            return has_strings(x.element_spec)
        if isinstance(x, dict):
            return False
        return is_text(x)

    #: strings per tokenizer call of `piece_counts` (bounds its tensors).
    COUNT_CHUNK = 10000

    def piece_counts(self, strings):
        """The tokenizer's pieces (a character model's words) of each of a
        list of strings, as a NumPy int array: the key `predict` sorts raw
        rows by. A chunk the tokenizer refuses (e.g. bytes that are not
        UTF-8) is counted in characters instead, so `predict`'s own
        pipeline reports the input as it always did."""
        counts = []
        for start in range(0, len(strings), self.COUNT_CHUNK):
            chunk = [s if isinstance(s, bytes) else str(s).encode("utf-8")
                     for s in strings[start:start + self.COUNT_CHUNK]]
            try:
                pieces = self.tokenizer.tokenize_ids(tf.constant(chunk, tf.string))
                counts.append(pieces.row_lengths().numpy())
            except (tf.errors.InvalidArgumentError, UnicodeError):
                counts.append(np.asarray([len(s) for s in chunk]))
        return np.concatenate(counts) if counts else np.zeros(0, np.int64)

    def inputs_of(self, data):
        """(x, y) of a `TaskData` (the CLI's examples) in the form `fit`
        takes from a user; y is None when the examples have no labels."""
        raise NotImplementedError

    def task_features(self, data):
        """A `TaskData` (the CLI's examples) -> `TaskFeatures` as the task
        type's metrics read them: the CLI's converter
        (`kerasbert.data.finetuning.convert_examples`) with this
        preprocessor's tokenizer, T and converter options (QA's windows)."""
        options = {name: getattr(self, name) for name in task_format(data.task_type).options
                   if hasattr(self, name)}
        return convert_examples(data, self.tokenizer, self.sequence_length, **options)

    def slices(self, x, y=None, sample_weight=None, num_labels=None):
        """Python / NumPy raw inputs -> (x, y, sample_weight) tensors with a
        leading example axis, for `Dataset.from_tensor_slices`."""
        raise NotImplementedError

    def preprocess(self, x, y=None, sample_weight=None):
        """A batch of raw tensors -> `(features, y, sample_weight)` packed as
        `keras.utils.pack_x_y_sample_weight`: TensorFlow ops only (traced
        by `tf.data`)."""
        raise NotImplementedError

    def batch_size_of(self, x):
        return None

    def dataset(self, x, y=None, sample_weight=None, batch_size=32, shuffle=False, seed=None,
                num_labels=None, fixed_shapes=False):
        """Raw inputs -> a batched, prefetched `tf.data.Dataset` of features
        (and labels), tokenized in a parallel `map`.

        `x` may be Python lists / NumPy arrays (with `y`, `sample_weight`
        beside it) or a `tf.data.Dataset` whose elements are `x`, `(x, y)`
        or `(x, y, sample_weight)` of strings, batched or not.

        With `shuffle`, the examples are shuffled every epoch by `seed`
        before batching: the same order as `kerasbert.data.finetuning.
        make_dataset` gives features of the same examples with that seed,
        and with `bucket_by_length` the same batches (pools tokenized, then
        grouped by their real pieces).
        Each batch is cut to its longest row (`padding`), unless
        `fixed_shapes` or padding="max_length".
        """
        batch_size = int(batch_size or 32)
        if isinstance(x, tf.data.Dataset):
            if y is not None or sample_weight is not None:
                raise ValueError("With a tf.data.Dataset, labels come inside its elements "
                                 "(x, y), not as y=.")
            self.adapt(x.element_spec)
            dataset = x if self._is_batched(x.element_spec) else x.batch(batch_size)
            return self._features(dataset, fixed_shapes)
        elements = keras.utils.pack_x_y_sample_weight(*self.slices(x, y, sample_weight,
                                                                    num_labels))
        dataset = tf.data.Dataset.from_tensor_slices(elements)
        if shuffle:
            count = int(dataset.cardinality())
            dataset = dataset.shuffle(count, seed=seed, reshuffle_each_iteration=True)
        if shuffle and self.bucket_by_length and not fixed_shapes:
            # Each pool is tokenized before it is sorted, so batches group
            # real pieces, not bytes (`bucket_batches`).
            batches = bucket_batches(dataset, batch_size, seed=seed,
                                     prepare=self._preprocess_element)
            return self.trimmed(batches).prefetch(tf.data.AUTOTUNE)
        return self._features(dataset.batch(batch_size), fixed_shapes)

    def _features(self, batches, fixed_shapes=False):
        """Batches of raw tensors -> batches of features, cut to their
        longest row unless fixed."""
        batches = batches.map(self._preprocess_element, num_parallel_calls=tf.data.AUTOTUNE)
        return self.trimmed(batches, fixed_shapes).prefetch(tf.data.AUTOTUNE)

    def trimmed(self, batches, fixed_shapes=False):
        """Batches of features cut to their longest row (padding="longest"),
        or as they are (fixed_shapes, padding="max_length")."""
        if self.padding != "longest" or fixed_shapes:
            return batches
        return batches.map(trim_element(self.pad_to_multiple_of),
                           num_parallel_calls=tf.data.AUTOTUNE)

    def adapt(self, spec):
        """Learns what it can from a dataset's element spec (a pair task
        from tuples of texts) before mapping it."""

    # TensorFlow ops with Python control flow on static values only: no
    # AutoGraph conversion (it costs seconds per dataset built, and more in
    # every export).
    @tf.autograph.experimental.do_not_convert
    def _preprocess_element(self, *element):
        # A dataset of pairs without labels yields (texts_a, texts_b): x.
        if self._tuple_is_x() and not isinstance(element[0], tuple):
            element = ((element[0], element[1]),) + element[2:]
        return self.preprocess(*element)

    def _tuple_is_x(self):
        """A two-text element is x (a text pair), not (x, y)."""
        return False

    def _is_batched(self, spec):
        """Whether a dataset's elements are batches (subclasses know the rank
        of one example's text)."""
        first = tf.nest.flatten(spec)[0]
        return first.shape.rank is not None and first.shape.rank > self.example_rank

    #: rank of one example's raw text tensor (0: a string; 1: words or choices).
    example_rank = 0

    def postprocess(self, outputs, x):
        """Model outputs on raw input -> what `predict` returns."""
        return outputs

    def predict_dataset(self, x, batch_size=32, fixed_shapes=False):
        """(dataset of features, context for `postprocess`) for raw `x`."""
        return self.dataset(x, batch_size=batch_size, fixed_shapes=fixed_shapes), x

    # --- saving --------------------------------------------------------------

    def save_assets(self, dir_path):
        save_tokenizer_files(self.tokenizer, dir_path)

    def load_assets(self, dir_path):
        if self.description is None:
            return
        files = _persistent_copy(dir_path)
        self._tokenizer = load_saved_tokenizer(files, {"tokenizer": self.description})
        self._packer = None

    def get_config(self):
        config = super().get_config()
        config.update({
            "tokenizer": self.description,
            "sequence_length": self.sequence_length,
            "label_names": self.label_names,
            "task_type": self.task_type,
            "padding": self.padding,
            "pad_to_multiple_of": self.pad_to_multiple_of,
            "bucket_by_length": self.bucket_by_length,
        })
        return config
