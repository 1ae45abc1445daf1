"""TF Hub-format SavedModels: a text preprocessor and a BERT encoder.

They follow the TF Hub "Text embeddings with Transformer encoders" API
(tensorflow.org/hub/common_saved_model_apis/text), as the published
`bert_en_uncased_preprocess` and `bert_en_uncased_L-12_H-768_A-12` do, so
code written for those works with ours:

    preprocessor = hub.load("DIR/preprocess")
    encoder = hub.load("DIR/encoder")
    inputs = preprocessor(tf.constant(["a sentence"]))   # 3 x int32 [B, 128]
    outputs = encoder(inputs)                             # pooled_output, ...

Preprocessor (`DIR/preprocess`, the tokenizer's files in assets/:
vocab.txt; sentencepiece.model for ALBERT; vocab.json + merges.txt for
RoBERTa):
    __call__(sentences): string [B] -> dict input_word_ids, input_mask,
        input_type_ids, int32 [B, sequence_length] (`[CLS] a [SEP]`, padded;
        RoBERTa: `<s> a </s>`).
    tokenize(sentences): string [B] -> int32 RaggedTensor [B, (words),
        (pieces)].
    tokenize.get_special_tokens_dict(): padding_id, start_of_sequence_id,
        end_of_segment_id, mask_id, vocab_size (int32 scalars).
    bert_pack_inputs(segments, seq_length=sequence_length): a list of 1 or 2
        int32 RaggedTensors [B, (words), (pieces)] or [B, (pieces)] -> the
        three int32 [B, sequence_length] inputs (`[CLS] a [SEP] b [SEP]`;
        RoBERTa: `<s> a </s></s> b </s>`, type ids 0).

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

import json
import os
import shutil
import sys
import tempfile

import tensorflow as tf

from kerasbert.convert.tf_hub_encoder import BACKBONE_FILE
from kerasbert.errors import UsageError
from kerasbert.models.config_checks import check_tokenizer_fits
from kerasbert.preprocessing.lengths import packed_length
from kerasbert import io_utils
from kerasbert import runs
from kerasbert.saving import load_model
from kerasbert.serving.hub_encoder import HubEncoder
from kerasbert.serving.hub_preprocessor import build_preprocessor
from kerasbert.serving.task_serving import MODEL_INPUTS
from kerasbert.sources.handles import is_remote
from kerasbert.loading.backbones import load_backbone_from_flags
from kerasbert.text.tokenizer_paths import resolve_tokenizer_path
from kerasbert.text.families import SAVED_FILES
from kerasbert.text.tokenizer_loading import _construct
from kerasbert.text.tokenizer_loading import tokenizer_settings
from kerasbert.text.tokenizer_loading import load_tokenizer
from kerasbert.text.tokenizer_loading import tokenizer_files
from kerasbert.text.tokenizer_loading import tokenizer_kind

# --- loading the Keras models ------------------------------------------------

def _require_file(path, what):
    if not os.path.isfile(path):
        raise UsageError(f"{what} not found: {path}")


def _comparable_config(model):
    config = dict(model.get_config())
    for key in ("name", "trainable"):
        config.pop(key, None)
    return config


def load_pretrainer_for(backbone, pretrainer_path, required=True):
    """Loads a saved `BertPretrainer` and gives its backbone `backbone`'s
    weights, so its MLM head decodes with them (it is tied to
    `pretrainer.backbone`'s token embedding).

    Returns:
        the pretrainer; None when the file has no masked-LM head (a causal
        LM's run) and `required` is False.

    Raises:
        UsageError: unreadable file, not a pretrainer, or an architecture
            different from `backbone`'s.
    """

    pretrainer = load_model(pretrainer_path, compile=False)
    if getattr(pretrainer, "masked_lm_head", None) is None and not required:
        return None
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


def _load_tokenizer(vocab_path, lower_case, directory, switches=None):
    """The tokenizer over copies of its files in `directory`, under the
    fixed names of kerasbert.text.families.SAVED_FILES (vocab.txt as the TF
    Hub BERT models carry; sentencepiece.model; vocab.json + merges.txt):
    each asset keeps its file's name."""

    try:
        # A model directory or hub handle names its files and its casing.
        found = load_tokenizer(vocab_path, lower_case=lower_case, **(switches or {}))
    except UsageError as err:
        raise UsageError(f"--vocab {err}") from None
    kind, files = tokenizer_kind(found), tokenizer_files(found)
    copies = [os.path.join(directory, name) for name in SAVED_FILES[kind]]
    for source, copy in zip(files, copies):
        shutil.copyfile(source, copy)
    try:
        return _construct(kind, copies, found.lower_case, **tokenizer_settings(found))
    except UsageError as err:
        # Name the user's file, not our copy.
        message = str(err)
        for source, copy in zip(files, copies):
            message = message.replace(copy, source)
        raise UsageError(f"--vocab {message}") from None


def _check_vocabulary_size(tokenizer, backbone, vocab_file):
    """More tokens than embedding rows is an error (ids out of range);
    fewer is allowed (embedding tables are sometimes padded) but unusual."""
    rows = getattr(backbone, "vocabulary_size", None)
    if rows is None or tokenizer.vocabulary_size == rows:
        return
    check_tokenizer_fits(tokenizer, backbone, f"--vocab {vocab_file}")
    print(f"warning: --vocab {vocab_file} has {tokenizer.vocabulary_size} tokens, the backbone "
          f"{rows} embedding rows; vocab_size and mlm_logits will differ in size.",
          file=sys.stderr)


# --- the export ----------------------------------------------------------------

def _save(root, signatures, directory):
    tf.saved_model.save(root, directory, signatures=signatures)


def _describe_backbone(backbone, encoder_dir):
    # So `--preset ENCODER_DIR` rebuilds exactly this family and configuration
    # (Model Garden's exports are read from their variable shapes instead).
    path = os.path.join(encoder_dir, BACKBONE_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"class_name": type(backbone).__name__, "config": backbone.get_config()}, f,
                  indent=1)


def export_hub(backbone_path, vocab_file, output_dir, lower_case=None, sequence_length=None,
               pretrainer_path=None, include_mlm=True, overwrite=False,
               tokenizer_switches=None):
    """Writes `output_dir/preprocess` and `output_dir/encoder` (see the
    module docstring) atomically: both or neither, and an earlier
    `output_dir` stays as it was until the new one is complete.

    Args:
        backbone_path: a saved backbone (RUN/backbone.keras; a saved
            pretrainer or task model works too: its `.backbone`), or any
            model handle (`kerasbert.loading.backbones`).
        vocab_file: the tokenizer the backbone was trained with: a WordPiece
            vocab.txt, a SentencePiece `.model` (ALBERT) or a byte-level BPE
            directory / vocab.json (RoBERTa); or a model handle / directory;
            None: `backbone_path`'s own tokenizer.
        output_dir: the directory to create.
        lower_case: uncased tokenization (False for cased models; None: the
            tokenizer source's setting, else uncased; byte-level BPE is
            always cased).
        sequence_length: T of the preprocessor's `__call__` (and the default of
            `bert_pack_inputs`); None: 128, or the backbone's positions if fewer.
        pretrainer_path: the `BertPretrainer` whose MLM head `.mlm` uses;
            default: pretrainer.keras next to `backbone_path`.
        include_mlm: False writes no `.mlm` (and needs no pretrainer).
        overwrite: replace an existing `output_dir`.
        tokenizer_switches: {switch: bool} over the tokenizer source's
            settings (`kerasbert.text.tokenizer_loading.SWITCHES`: special-token
            strings matched in the input text, text after a NUL dropped);
            a switch left out or None: the source's setting, else off.

    Returns:
        {"preprocess": path, "encoder": path}.

    Raises:
        UsageError: missing files, a bad vocabulary, a pretrainer that does
            not match, an existing output without `overwrite`.
    """

    backbone_path, vocab_file, output_dir = _checked_paths(
        backbone_path, vocab_file, output_dir, sequence_length, overwrite)
    chosen = pretrainer_path is not None
    if include_mlm:
        pretrainer_path, include_mlm = _pretrainer_file(backbone_path, pretrainer_path)
    backbone = load_backbone_from_flags(backbone=backbone_path)
    _check_backbone_inputs(backbone, backbone_path)
    sequence_length = _sequence_length(backbone, sequence_length)
    head = None
    if include_mlm:
        backbone, head = _with_mlm_head(backbone, pretrainer_path, required=chosen)
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer = _load_tokenizer(vocab_file, lower_case, scratch, tokenizer_switches)
        if not tokenizer_files(tokenizer):
            raise UsageError(f"The TF Hub preprocess/encoder pair reads a vocabulary file; "
                             f"{vocab_file}'s {tokenizer_kind(tokenizer)} tokenizer has none.")
        _check_vocabulary_size(tokenizer, backbone, vocab_file)
        _write_pair(output_dir, overwrite, tokenizer, backbone, head, sequence_length)
    return {name: os.path.join(output_dir, name) for name in ("preprocess", "encoder")}


def _checked_paths(backbone_path, vocab_file, output_dir, sequence_length, overwrite):
    """`export_hub`'s paths as strings, checked before anything loads:
    (backbone_path, vocab_file, output_dir), the vocabulary defaulting to the
    backbone's own (a saved .keras file: the run's tokenizer files; any
    model handle: the handle itself)."""
    backbone_path = os.fspath(backbone_path)
    vocab_file = (os.fspath(vocab_file) if vocab_file is not None
                  else runs.default_vocab(backbone=backbone_path)
                  if not is_remote(backbone_path) and os.path.isfile(backbone_path)
                  else backbone_path)
    output_dir = os.path.abspath(os.fspath(output_dir))
    if not is_remote(backbone_path) and not os.path.isdir(backbone_path):
        _require_file(backbone_path, "--backbone file")
    if not is_remote(vocab_file) and not os.path.isdir(vocab_file):
        resolve_tokenizer_path(vocab_file)  # names a missing file
    if sequence_length is not None and int(sequence_length) < 2:
        raise UsageError(f"--seq-length must be at least 2, got {sequence_length}.")
    if os.path.exists(output_dir) and not overwrite:
        raise UsageError(f"{output_dir} already exists (pass --overwrite to replace it).")
    return backbone_path, vocab_file, output_dir


def _pretrainer_file(backbone_path, pretrainer_path):
    """(the pretrainer file `.mlm` comes from, whether to write `.mlm`).

    Default: pretrainer.keras of the backbone's run. A handle or directory
    that brings none exports without `.mlm` (with a note); a missing file
    that was named or belongs beside a saved backbone is an error."""
    include_mlm = True
    if pretrainer_path is None:
        pretrainer_path = (runs.run_path(backbone_path, runs.PRETRAINER)
                           if os.path.isdir(backbone_path)
                           else runs.beside(backbone_path, runs.PRETRAINER))
        if not os.path.isfile(pretrainer_path) and (
                is_remote(backbone_path) or os.path.isdir(backbone_path)):
            print(f"note: {backbone_path} brings no kerasbert pretraining head: the encoder "
                  "is exported without .mlm.", file=sys.stderr)
            include_mlm = False
    pretrainer_path = os.fspath(pretrainer_path)
    if include_mlm and not os.path.isfile(pretrainer_path):
        raise UsageError(
            f"The .mlm sub-object needs the pretraining head: {pretrainer_path} not found "
            "(give --pretrainer PATH, or --no-mlm to export without it)."
        )
    return pretrainer_path, include_mlm


def _sequence_length(backbone, sequence_length):
    """The preprocessor's T: `sequence_length`, checked against the
    backbone's positions; None: 128, or the positions if fewer."""
    positions = getattr(backbone, "max_sequence_length", None)
    if sequence_length is None:  # the text tasks' default, at most the positions
        sequence_length = packed_length(backbone)
    if positions is not None and int(sequence_length) > positions:
        raise UsageError(
            f"--seq-length {sequence_length} is longer than the backbone's max_sequence_length "
            f"{positions}."
        )
    return sequence_length


def _with_mlm_head(backbone, pretrainer_path, required):
    """(backbone, masked-LM head) for the encoder: the pretrainer's backbone
    (holding `backbone`'s weights) and head, or `backbone` and None when the
    pretrainer predicts no masked tokens and was not `required`."""
    pretrainer = load_pretrainer_for(backbone, pretrainer_path, required=required)
    if pretrainer is None:  # the run's own pretrainer predicts no masked tokens
        print(f"note: {pretrainer_path} has no masked-LM head: the encoder is exported "
              "without .mlm.", file=sys.stderr)
        return backbone, None
    return pretrainer.backbone, pretrainer.masked_lm_head


def _write_pair(output_dir, overwrite, tokenizer, backbone, head, sequence_length):
    """Saves `output_dir/preprocess` and `output_dir/encoder` in one atomic
    directory: both or neither."""
    try:
        with io_utils.atomic_directory(output_dir, overwrite=overwrite) as tmp:
            _save(*build_preprocessor(tokenizer, int(sequence_length)),
                  os.path.join(tmp, "preprocess"))
            encoder = HubEncoder(backbone, head, vocab_file=tokenizer_files(tokenizer)[0],
                                 lower_case=tokenizer.lower_case)
            _save(*encoder.build(), os.path.join(tmp, "encoder"))
            _describe_backbone(backbone, os.path.join(tmp, "encoder"))
    except FileExistsError as err:
        raise UsageError(str(err)) from None
