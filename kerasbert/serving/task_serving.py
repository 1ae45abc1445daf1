"""`TaskServing`: a fine-tuned task model and its tokenizer as one
`tf.Module`, served on raw strings by TF Serving.

Every task type subclasses it and states three things: the raw string
inputs of `serving_default` (`raw_inputs`), how to turn them into decoded
outputs inside the graph (`serve`), and edge-case requests that must pass
(`warmup_requests`). The base class adds `serve_token_ids` (the model on
already-tokenized int32 inputs, range-checked: an id outside the tables is
an InvalidArgumentError, never a wrapped-around or, on a GPU, a zero
embedding) and builds the concrete signature functions `tf.saved_model.save`
writes.

Everything traced here is TensorFlow and tensorflow-text ops, so the
SavedModel loads with `import tensorflow_text` and nothing of ours. The
module owns the tokenizer (a `tf.Module` holding the vocabulary asset and
its lookup table): `tf.saved_model.save` tracks both through it, which is
the part Keras 3's `ExportArchive` gets wrong for lookup tables.
"""

import tensorflow as tf

from kerasbert.serving.graph_options import GraphOptions
from kerasbert.serving.graph_options import check_options
from kerasbert.serving.graph_options import in_precision
from kerasbert.serving.graph_options import model_function
from kerasbert.serving.graph_options import restore_length
from kerasbert.serving.graph_options import trim_padding
from kerasbert.preprocessing.task_preprocessor import clean_text  # noqa: F401 (served as trained)
from kerasbert.text import make_packer

MODEL_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")

# A text of 100,000 characters, and other inputs the warm-up must survive.
LONG_TEXT = ("The quick brown fox jumps over the lazy dog. " * 2223)[:100_000]
EDGE_TEXTS = (
    "",
    "   \t\n ",
    LONG_TEXT,
    "naïve café — 東京タワー 😀 \u200b\u200czero\u200dwidth\x07\x1b",
    b"invalid \xff\xfe UTF-8 \xc3(",
)


def check_ids_in_range(ids, size, name, what):
    """`ids` with an assertion that every value is in [0, size): core
    `Assert` ops (tf.debugging), so TF Serving needs no custom op.

    Args:
        ids: int32 tensor of any shape.
        size: the table's rows (a Python int).
        name, what: for the message, e.g. "input_word_ids", "the vocabulary
            size".

    Raises (when run):
        tf.errors.InvalidArgumentError naming the input and the bound.
    """
    checks = [
        tf.debugging.assert_non_negative(
            ids, message=f"{name}: ids must be >= 0 (a negative id is not a token)"),
        tf.debugging.assert_less(
            ids, tf.constant(size, ids.dtype),
            message=f"{name}: ids must be < {size}, {what}"),
    ]
    with tf.control_dependencies(checks):
        return tf.identity(ids)


def string_spec(name, shape=(None,)):
    return tf.TensorSpec(shape, tf.string, name=name)


def substrings(texts, starts, ends):
    """texts[b][starts[b, k]:ends[b, k]] in code points, for int [B, K]
    spans (end exclusive); "" where start < 0.

    Args:
        texts: string [B] (valid UTF-8).
        starts, ends: int [B, K].

    Returns:
        string [B, K].
    """
    starts = tf.cast(starts, tf.int32)
    ends = tf.cast(ends, tf.int32)
    valid = starts >= 0
    repeated = tf.broadcast_to(texts[:, tf.newaxis], tf.shape(starts))
    pieces = tf.strings.substr(
        repeated, tf.maximum(starts, 0), tf.maximum(ends - starts, 0), unit="UTF8_CHAR"
    )
    return tf.where(valid, pieces, tf.zeros_like(pieces))


class TaskServing(tf.Module):
    """Base class: raw strings in, decoded task outputs out.

    Args:
        model: the fine-tuned Keras task model (`kerasbert.tasks.*`).
        tokenizer: the tokenizer the model was fine-tuned with
            (WordPiece, SentencePiece or byte-level BPE; its family picks
            the packer, `kerasbert.text.make_packer`).
        sequence_length: T, the packed sequence length (<= the model's
            positions).
        label_names: class or tag names (None for regression, QA, multiple
            choice).
        options: `GraphOptions` (or its config dict) for how the graph runs
            the model; default `GraphOptions()`.
        packer: the packer of the model's preprocessor (`for_preprocessor`
            passes it: the graph packs with the very object training packed
            with); default the tokenizer family's at T
            (`kerasbert.text.make_packer`).
    """

    #: names of the `tf.string [None]` inputs of `serving_default`.
    raw_inputs = ("text",)
    #: why the measured encoders' TF Serving batching values do not apply to
    #: this module (export.json says it; no batching file), or None.
    no_batching_reason = None

    def __init__(self, model, tokenizer, sequence_length, label_names=None, options=None,
                 name=None, packer=None):
        super().__init__(name=name)
        self.tokenizer = tokenizer
        self.sequence_length = int(sequence_length)
        self.options = check_options(GraphOptions.from_config(options), model.backbone,
                                     self.sequence_length)
        # Only the copy in the export's precision is tracked (and saved).
        model = in_precision(model, self.options.precision)
        self.model = model
        self._forward = model_function(model, self.options.jit_compile)
        self.packer = packer if packer is not None else make_packer(tokenizer,
                                                                    self.sequence_length)
        names = list(label_names or [])
        self.label_names = list(names)
        self.label_table = tf.constant(names or [""], tf.string)

    @classmethod
    def for_preprocessor(cls, model, preprocessor, label_names=None, options=None):
        """The module that serves `model` as `preprocessor` feeds it in
        training: its tokenizer, its packed length and its packer (the same
        objects); subclasses read their task options from it.

        Args:
            model: the task model.
            preprocessor: its `TaskPreprocessor` (the one factory's,
                `kerasbert.tasks.preprocessor_factory`).
            label_names: the names served (default the preprocessor's).
            options: `GraphOptions` or its dict.
        """
        return cls(model, preprocessor.tokenizer, preprocessor.sequence_length,
                   label_names or preprocessor.label_names, options=options,
                   packer=preprocessor.packer)

    def export_info(self):
        """What assets.extra/export.json records beyond the common fields."""
        return {}

    # --- what subclasses define ------------------------------------------

    def input_specs(self):
        """`TensorSpec`s of `serving_default`, in argument order."""
        return [string_spec(name) for name in self.raw_inputs]

    def serve(self, inputs):
        """{input name: string tensor} -> {output name: tensor}; traced."""
        raise NotImplementedError(f"{type(self).__name__} must define serve().")

    def token_ids_shape(self):
        """Shape of each `serve_token_ids` input ([B, T] for most tasks)."""
        return (None, self.sequence_length)

    def token_input_specs(self):
        """`TensorSpec`s of `serve_token_ids`: the model's own inputs."""
        return [tf.TensorSpec(self.token_ids_shape(), tf.int32, name=n) for n in MODEL_INPUTS]

    def check_token_inputs(self, inputs):
        """{name: tensor} of `serve_token_ids` -> checked model inputs."""
        return self.checked_token_ids(**inputs)

    def serve_token_inputs(self, inputs):
        """`serve_token_ids`' answer to {name: tensor} of `token_input_specs`."""
        return self.model_outputs(self.check_token_inputs(inputs))

    def model_outputs(self, features):
        """Raw model outputs for `serve_token_ids`: a dict of tensors. The
        client chose the padding, so none is trimmed here."""
        outputs = self._forward(features)
        if not isinstance(outputs, dict):
            outputs = {"logits": outputs}
        return {k: tf.cast(v, tf.float32) for k, v in outputs.items()}

    def warmup_requests(self):
        """A list of {input name: list of str} requests for the warm-up file:
        ordinary text and the edge cases every served model must survive."""
        requests = [{name: ["A short example sentence."] for name in self.raw_inputs}]
        for text in EDGE_TEXTS:
            requests.append({name: [text] for name in self.raw_inputs})
        return requests

    def warmup_token_ids(self):
        """A `serve_token_ids` request: the first warm-up request packed
        ({input name: int32 array})."""
        first = self.warmup_requests()[0]
        texts = [tf.constant(first[name], tf.string) for name in self.raw_inputs[:2]]
        return {name: value.numpy() for name, value in self.encode_batch(*texts).items()}

    # --- shared pieces ---------------------------------------------------

    def encode_batch(self, texts_a, texts_b=None):
        """Raw strings [B] (and [B]) -> int32 model inputs [B, T]."""
        a = self.tokenizer.tokenize_ids(clean_text(texts_a))
        b = None if texts_b is None else self.tokenizer.tokenize_ids(clean_text(texts_b))
        return self.packer(a, b)

    def checked_token_ids(self, input_word_ids, input_mask, input_type_ids):
        """The three `serve_token_ids` inputs as a model-input dict, word
        ids checked against the vocabulary size and type ids against the
        segment table (when the family has one): Keras' gather wraps a
        negative id around to the end of the table and a GPU gathers zeros
        past it, so a client's bad id would give a silent wrong answer."""
        backbone = self.model.backbone
        input_word_ids = check_ids_in_range(
            input_word_ids, backbone.vocabulary_size, "input_word_ids",
            "the vocabulary size")
        segments = getattr(backbone, "num_segments", 0) or 0
        if segments:
            input_type_ids = check_ids_in_range(
                input_type_ids, segments, "input_type_ids", "the number of segments")
        return {"input_word_ids": input_word_ids, "input_mask": input_mask,
                "input_type_ids": input_type_ids}

    def trim(self, features):
        """Packed inputs [..., T] cut to the batch's longest row when the
        export pads to the longest (`GraphOptions`); else unchanged."""
        if not self.options.pad_to_longest:
            return features
        return trim_padding(features, self.options.length_multiple)

    def run_model(self, features, token_outputs=False):
        """The model on packed inputs [..., T] as the export's options say:
        padding trimmed, XLA-compiled or not. Outputs are float32 (a tensor
        or a dict, as the model returns).

        Args:
            features: the packer's dict, int32 [..., T].
            token_outputs: the outputs have a token axis after the inputs'
                batch axes (tagging [B, T, C]); it is padded back to T.
        """
        trimmed = self.trim(features)
        outputs = tf.nest.map_structure(lambda v: tf.cast(v, tf.float32), self._forward(trimmed))
        if token_outputs and trimmed is not features:
            axis = features["input_mask"].shape.rank - 1
            outputs = tf.nest.map_structure(
                lambda v: restore_length(v, self.sequence_length, axis), outputs)
        return outputs

    def lookup_labels(self, ids):
        return tf.gather(self.label_table, tf.maximum(ids, 0))

    # --- signatures ------------------------------------------------------

    def signatures(self):
        """{"serving_default": ..., "serve_token_ids": ...} concrete functions."""
        names = [spec.name for spec in self.input_specs()]

        def serving_default(*args):
            return self.serve(dict(zip(names, args)))

        int_spec = self.token_input_specs()
        int_names = [spec.name for spec in int_spec]

        def serve_token_ids(*args):
            return self.serve_token_inputs(dict(zip(int_names, args)))

        # Our graph code is TensorFlow ops with Python control flow on static
        # values only: AutoGraph would add nothing but its conversion, about
        # half of an export's time.
        return {
            "serving_default": tf.function(
                serving_default, input_signature=self.input_specs(), autograph=False
            ).get_concrete_function(),
            "serve_token_ids": tf.function(
                serve_token_ids, input_signature=int_spec, autograph=False
            ).get_concrete_function(),
        }
