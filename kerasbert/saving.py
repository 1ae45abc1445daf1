"""Loading what kerasbert saves (`model.keras`, `backbone.keras`,
`pretrainer.keras`), in any process.

Keras finds a saved custom class only if the module that registers it
(`keras.saving.register_keras_serializable`) has been imported. kerasbert
imports its sub-packages lazily (so `kerasbert --help` does not load
TensorFlow), which is why a fresh process that only ran `import kerasbert`
must load through here:

    import kerasbert
    model = kerasbert.load_model("runs/ft/model.keras")

or call `kerasbert.register_all()` once and use `keras.saving.load_model`.
"""

import importlib
import os
import zipfile

from kerasbert.errors import UsageError

# Every module that registers a Keras class. tests/test_saving.py checks
# this list against the `register_keras_serializable` decorators in the
# package, so a new class cannot be forgotten here.
SERIALIZABLE_MODULES = (
    "kerasbert.layers.attention",
    "kerasbert.layers.axial_position_embedding",
    "kerasbert.layers.block_sparse_attention",
    "kerasbert.layers.chunked_feed_forward",
    "kerasbert.layers.embeddings",
    "kerasbert.layers.initializers",
    "kerasbert.layers.local_attention",
    "kerasbert.layers.lsh_attention",
    "kerasbert.layers.masked_lm_head",
    "kerasbert.layers.pooler",
    "kerasbert.layers.pre_norm_branch",
    "kerasbert.layers.reversible_sequence",
    "kerasbert.layers.sentence_head",
    "kerasbert.layers.transformer_block",
    "kerasbert.models.albert.albert_backbone",
    "kerasbert.models.bert.bert_backbone",
    "kerasbert.models.big_bird.big_bird_backbone",
    "kerasbert.models.distil_bert.distil_bert_backbone",
    "kerasbert.models.electra.electra_backbone",
    "kerasbert.models.gpt.gpt_backbone",
    "kerasbert.models.reformer.reformer_backbone",
    "kerasbert.models.roberta.roberta_backbone",
    "kerasbert.tasks.bert_pretrainer",
    "kerasbert.tasks.causal_lm",
    "kerasbert.tasks.distiller",
    "kerasbert.tasks.electra_pretrainer",
    "kerasbert.tasks.gpt_classifier",
    "kerasbert.tasks.multiple_choice",
    "kerasbert.tasks.pearson_correlation",
    "kerasbert.tasks.question_answerer",
    "kerasbert.tasks.text_classifier",
    "kerasbert.tasks.token_classifier",
    "kerasbert.optimizers.bert_optimizers",
    "kerasbert.optimizers.schedules",
)

# Failures that come from the file, not from kerasbert: a refusal by safe
# mode, a class of another library or of a newer kerasbert, a file that is
# not a Keras archive. Anything else is a bug and keeps its traceback.
_FILE_PROBLEMS = (
    "safe_mode", "Could not locate", "File format not supported", "Could not deserialize",
    "not a zip file", "Unable to synchronously open", "truncated", "Invalid filepath",
)


def register_all():
    """Imports every module that registers a kerasbert class with Keras."""
    for module in SERIALIZABLE_MODULES:
        importlib.import_module(module)


def load_model(path, compile=True, safe_mode=True):
    """`keras.saving.load_model` for any `.keras` file kerasbert wrote.

    Args:
        path: a `.keras` file (a run's model.keras, backbone.keras, ...).
        compile: restore the optimizer and losses too.
        safe_mode: as Keras: refuse files that would run arbitrary code
            (Lambda layers with pickled functions).

    Raises:
        UsageError: the file is missing, a directory, not a Keras archive,
            truncated, refused by safe mode, or holds classes that neither
            kerasbert nor Keras knows; the message names the file.
    """
    import keras

    path = os.fspath(path)
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file.")
    if os.path.isdir(path):
        raise UsageError(f"{path} is a directory; expected a .keras model file.")
    if not zipfile.is_zipfile(path):
        raise UsageError(f"{path}: not a readable .keras file (not a zip archive: truncated, "
                         "or another format).")
    register_all()
    try:
        return keras.saving.load_model(path, compile=compile, safe_mode=safe_mode)
    except (zipfile.BadZipFile, EOFError, OSError) as err:
        raise UsageError(f"{path}: not a readable .keras file ({_first_line(err)}).") from None
    except (ValueError, TypeError, KeyError) as err:
        if not any(problem in str(err) for problem in _FILE_PROBLEMS):
            raise
        raise UsageError(f"{path}: cannot load it as a Keras model: {_first_line(err)}") from None


def _first_line(err):
    text = str(err).strip() or type(err).__name__
    return " ".join(text.split())[:400]
