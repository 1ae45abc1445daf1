"""TF Hub-format SavedModels: a text preprocessor and a BERT encoder.

They follow the TF Hub "Text embeddings with Transformer encoders" API
(tensorflow.org/hub/common_saved_model_apis/text), as the published
`bert_en_uncased_preprocess` and `bert_en_uncased_L-12_H-768_A-12` do, so
code written for those works with ours:

    preprocessor = hub.load("DIR/preprocess")
    encoder = hub.load("DIR/encoder")
    inputs = preprocessor(tf.constant(["a sentence"]))   # 3 x int32 [B, 128]
    outputs = encoder(inputs)                             # pooled_output, ...

Preprocessor (`DIR/preprocess`, `assets/vocab.txt` inside):
    __call__(sentences): string [B] -> dict input_word_ids, input_mask,
        input_type_ids, int32 [B, seq_length] (`[CLS] a [SEP]`, padded).
    tokenize(sentences): string [B] -> int32 RaggedTensor [B, (words),
        (pieces)].
    tokenize.get_special_tokens_dict(): padding_id, start_of_sequence_id,
        end_of_segment_id, mask_id, vocab_size (int32 scalars).
    bert_pack_inputs(segments, seq_length=seq_length): a list of 1 or 2
        int32 RaggedTensors [B, (words), (pieces)] or [B, (pieces)] -> the
        three int32 [B, seq_length] inputs (`[CLS] a [SEP] b [SEP]`).

Encoder (`DIR/encoder`), a "Reusable SavedModel" (hub.KerasLayer(...,
trainable=True) fine-tunes it):
    __call__(inputs, training=False): dict of int32 [B, T] input_word_ids,
        input_mask, input_type_ids -> dict pooled_output [B, H],
        sequence_output [B, T, H], encoder_outputs (list of L [B, T, H]),
        default (= pooled_output); float32.
    variables, trainable_variables, regularization_losses.
    mlm.__call__(inputs, training=False): the same inputs plus
        masked_lm_positions int32 [B, P] -> the outputs above plus
        mlm_logits float32 [B, P, V] (the pretraining head, tied to the
        encoder's token embedding); `mlm.variables` etc. as above.
    vocab_file (asset) and do_lower_case, as the TF Hub BERT encoders carry.
    signatures["serving_default"]: the three inputs -> pooled_output,
        sequence_output, default, encoder_outputs_<i>.

Everything saved is TensorFlow and tensorflow-text ops: loading needs
`import tensorflow_text` and nothing of ours, of Keras or of TF Hub.
"""

import os
import shutil
import sys
import tempfile

from kerasbert.errors import UsageError

MODEL_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
VOCAB_NAME = "vocab.txt"


# --- building blocks ---------------------------------------------------------

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
        vocab_file: path of the vocab.txt to carry as an asset (or None).
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


def build_preprocessor(tokenizer, seq_length):
    """The preprocessor SavedModel's root object and signatures.

    Args:
        tokenizer: a `kerasbert.text.WordPieceTokenizer` (its vocabulary
            file becomes the asset; name it vocab.txt).
        seq_length: T of `__call__` and the default of `bert_pack_inputs`.

    Returns:
        (root, {"serving_default": concrete function}).
    """
    import tensorflow as tf

    from kerasbert.text import BertPacker

    packer = BertPacker.from_tokenizer(tokenizer, seq_length)
    sentences = tf.TensorSpec([None], tf.string, name="sentences")

    root = tf.train.Checkpoint()
    # Tracked here so the vocabulary asset and the lookup table are saved.
    root.tokenizer = tokenizer

    tokenize = tf.train.Checkpoint()
    tokenize.__call__ = tf.function(tokenizer.tokenize, input_signature=[sentences],
                                    autograph=False)
    tokenize.get_special_tokens_dict = tf.function(tokenizer.get_special_tokens_dict,
                                                   input_signature=[])
    root.tokenize = tokenize

    default_length = int(seq_length)

    def pack(segments, seq_length=default_length):
        if not 1 <= len(segments) <= 2:
            raise ValueError(f"bert_pack_inputs takes 1 or 2 segments, got {len(segments)}.")
        return packer(*segments, seq_length=seq_length)

    pack_inputs = tf.train.Checkpoint()
    pack_inputs.__call__ = tf.function(pack, autograph=False)
    # Segments may be [B, (words), (pieces)] (from tokenize) or [B, (pieces)];
    # one or two of them; seq_length a tensor so any value works.
    for ragged_rank in (1, 2):
        for count in (1, 2):
            spec = tf.RaggedTensorSpec([None] * (ragged_rank + 1), tf.int32,
                                       ragged_rank=ragged_rank)
            pack_inputs.__call__.get_concrete_function(
                [spec] * count, seq_length=tf.TensorSpec([], tf.int32))
    root.bert_pack_inputs = pack_inputs

    # The root calls the two functions above (their traces are reused, and
    # the SavedModel holds one copy of the tokenizer's graph).
    def preprocess(texts):
        packed = pack_inputs.__call__([tokenize.__call__(texts)],
                                      seq_length=tf.constant(default_length, tf.int32))
        return {k: tf.ensure_shape(v, [None, default_length]) for k, v in packed.items()}

    root.__call__ = tf.function(preprocess, input_signature=[sentences], autograph=False)
    return root, {"serving_default": root.__call__.get_concrete_function()}


# --- loading the Keras models ------------------------------------------------

def _require_file(path, what):
    if not os.path.isfile(path):
        raise UsageError(f"{what} not found: {path}")


def _comparable_config(model):
    config = dict(model.get_config())
    for key in ("name", "trainable"):
        config.pop(key, None)
    return config


def load_pretrainer_for(backbone, pretrainer_path):
    """Loads a saved `BertPretrainer` and gives its backbone `backbone`'s
    weights, so its MLM head decodes with them (it is tied to
    `pretrainer.backbone`'s token embedding).

    Returns:
        the pretrainer.

    Raises:
        UsageError: unreadable file, not a pretrainer, or an architecture
            different from `backbone`'s.
    """
    import keras

    from kerasbert.backbone_loading import _import_task_classes

    _import_task_classes()
    try:
        pretrainer = keras.saving.load_model(pretrainer_path, compile=False)
    except Exception as err:  # noqa: BLE001  (bad zip, unknown class, ...)
        raise UsageError(f"Cannot load {pretrainer_path} as a Keras model: {err}") from None
    if getattr(pretrainer, "masked_lm_head", None) is None:
        raise UsageError(
            f"{pretrainer_path} is a {type(pretrainer).__name__}, not a pretrainer with a "
            "masked_lm_head (expected RUN/pretrainer.keras)."
        )
    inner = pretrainer.backbone
    mine, theirs = _comparable_config(backbone), _comparable_config(inner)
    if type(inner) is not type(backbone) or mine != theirs:
        diff = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        detail = ", ".join(f"{k}: {mine.get(k)!r} vs {theirs.get(k)!r}" for k in diff)
        raise UsageError(
            f"The backbone and {pretrainer_path} differ in architecture "
            f"({type(backbone).__name__} vs {type(inner).__name__}"
            f"{'; ' + detail if detail else ''}); give the pretrainer.keras of the same run "
            "(--pretrainer) or --no-mlm."
        )
    inner.set_weights(backbone.get_weights())
    return pretrainer


def _check_backbone_inputs(backbone, path):
    names = set(getattr(backbone, "input", {}) or {})
    if names != set(MODEL_INPUTS):
        raise UsageError(
            f"{path}: the backbone takes {sorted(names)}, the TF Hub encoder API needs "
            f"{list(MODEL_INPUTS)}."
        )


def _load_tokenizer(vocab_file, lower_case, directory):
    """A `WordPieceTokenizer` over a copy of `vocab_file` named vocab.txt in
    `directory` (the asset keeps the file's name; TF Hub models carry
    assets/vocab.txt)."""
    from kerasbert.text import WordPieceTokenizer

    copy = os.path.join(directory, VOCAB_NAME)
    shutil.copyfile(vocab_file, copy)
    try:
        return WordPieceTokenizer(copy, lower_case=lower_case)
    except (ValueError, UnicodeDecodeError) as err:
        # Name the user's file, not our copy.
        raise UsageError(f"--vocab {vocab_file}: {str(err).replace(copy, vocab_file)}") from None


def _check_vocabulary_size(tokenizer, backbone, vocab_file):
    """More tokens than embedding rows is an error (ids out of range);
    fewer is allowed (embedding tables are sometimes padded) but unusual."""
    rows = getattr(backbone, "vocabulary_size", None)
    if rows is None or tokenizer.vocabulary_size == rows:
        return
    if tokenizer.vocabulary_size > rows:
        raise UsageError(
            f"--vocab {vocab_file} has {tokenizer.vocabulary_size} tokens but the backbone "
            f"only {rows} embedding rows: not the vocabulary it was trained with."
        )
    print(f"warning: --vocab {vocab_file} has {tokenizer.vocabulary_size} tokens, the backbone "
          f"{rows} embedding rows; vocab_size and mlm_logits will differ in size.",
          file=sys.stderr)


# --- the export ----------------------------------------------------------------

def _save(root, signatures, directory):
    import tensorflow as tf

    tf.saved_model.save(root, directory, signatures=signatures)


def export_hub(backbone_path, vocab_file, output_dir, lower_case=True, seq_length=128,
               pretrainer_path=None, include_mlm=True, overwrite=False):
    """Writes `output_dir/preprocess` and `output_dir/encoder` (see the
    module docstring) atomically: both or neither, and an earlier
    `output_dir` stays as it was until the new one is complete.

    Args:
        backbone_path: a saved backbone (RUN/backbone.keras; a saved
            pretrainer or task model works too: its `.backbone`).
        vocab_file: the vocab.txt the backbone was trained with.
        output_dir: the directory to create.
        lower_case: uncased tokenization (False for cased models).
        seq_length: T of the preprocessor's `__call__` (and the default of
            `bert_pack_inputs`).
        pretrainer_path: the `BertPretrainer` whose MLM head `.mlm` uses;
            default: pretrainer.keras next to `backbone_path`.
        include_mlm: False writes no `.mlm` (and needs no pretrainer).
        overwrite: replace an existing `output_dir`.

    Returns:
        {"preprocess": path, "encoder": path}.

    Raises:
        UsageError: missing files, a bad vocabulary, a pretrainer that does
            not match, an existing output without `overwrite`.
    """
    from kerasbert import io_utils
    from kerasbert.backbone_loading import load_backbone

    backbone_path, vocab_file = os.fspath(backbone_path), os.fspath(vocab_file)
    output_dir = os.path.abspath(os.fspath(output_dir))
    _require_file(backbone_path, "--backbone file")
    _require_file(vocab_file, "--vocab file")
    if int(seq_length) < 2:
        raise UsageError(f"--seq-length must be at least 2, got {seq_length}.")
    if os.path.exists(output_dir) and not overwrite:
        raise UsageError(f"{output_dir} already exists (pass --overwrite to replace it).")
    if include_mlm:
        if pretrainer_path is None:
            pretrainer_path = os.path.join(os.path.dirname(os.path.abspath(backbone_path)),
                                           "pretrainer.keras")
        pretrainer_path = os.fspath(pretrainer_path)
        if not os.path.isfile(pretrainer_path):
            raise UsageError(
                f"The .mlm sub-object needs the pretraining head: {pretrainer_path} not found "
                "(give --pretrainer PATH, or --no-mlm to export without it)."
            )

    backbone = load_backbone(backbone=backbone_path)
    _check_backbone_inputs(backbone, backbone_path)
    positions = getattr(backbone, "max_sequence_length", None)
    if positions is not None and int(seq_length) > positions:
        raise UsageError(
            f"--seq-length {seq_length} is longer than the backbone's max_sequence_length "
            f"{positions}."
        )
    head = None
    if include_mlm:
        pretrainer = load_pretrainer_for(backbone, pretrainer_path)
        backbone, head = pretrainer.backbone, pretrainer.masked_lm_head

    with tempfile.TemporaryDirectory() as scratch:
        tokenizer = _load_tokenizer(vocab_file, lower_case, scratch)
        _check_vocabulary_size(tokenizer, backbone, vocab_file)
        try:
            with io_utils.atomic_directory(output_dir, overwrite=overwrite) as tmp:
                _save(*build_preprocessor(tokenizer, int(seq_length)),
                      os.path.join(tmp, "preprocess"))
                encoder = HubEncoder(backbone, head, vocab_file=tokenizer.vocab_file,
                                     lower_case=lower_case)
                _save(*encoder.build(), os.path.join(tmp, "encoder"))
        except FileExistsError as err:
            raise UsageError(str(err)) from None
    return {name: os.path.join(output_dir, name) for name in ("preprocess", "encoder")}
