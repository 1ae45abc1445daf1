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

import os
import zipfile

from kerasbert.layers import attention
from kerasbert.layers import axial_position_embedding
from kerasbert.layers import block_sparse_attention
from kerasbert.layers import character_cnn
from kerasbert.layers import chunked_feed_forward
from kerasbert.layers import embeddings
from kerasbert.layers import fast_dropout
from kerasbert.layers import fused_dense
from kerasbert.layers import fused_layer_norm
from kerasbert.layers import gated_feed_forward
from kerasbert.layers import highway
from kerasbert.layers import initializers
from kerasbert.layers import local_attention
from kerasbert.layers import lsh_attention
from kerasbert.layers import masked_lm_head
from kerasbert.layers import pooler
from kerasbert.layers import position_embedding
from kerasbert.layers import pre_norm_branch
from kerasbert.layers import projected_lstm
from kerasbert.layers import reversible_sequence
from kerasbert.layers import rotary_embedding
from kerasbert.layers import scalar_mix
from kerasbert.layers import sentence_head
from kerasbert.layers import sentence_pooling
from kerasbert.layers import sinusoidal_position_encoding
from kerasbert.layers import transformer_block
from kerasbert.layers import transformer_decoder_block
from kerasbert.models.albert import albert_backbone
from kerasbert.models.bert import bert_backbone
from kerasbert.models.big_bird import big_bird_backbone
from kerasbert.models.distil_bert import distil_bert_backbone
from kerasbert.models.electra import electra_backbone
from kerasbert.models.elmo import elmo_backbone
from kerasbert.models.gpt import gpt_backbone
from kerasbert.models.modernbert import modernbert_backbone
from kerasbert.models.modernbert import modernbert_block
from kerasbert.models.reformer import reformer_backbone
from kerasbert.models.roberta import roberta_backbone
from kerasbert.models.transformer import transformer_backbone
from kerasbert.optimizers import bert_optimizers
from kerasbert.optimizers import schedules
from kerasbert.preprocessing import elmo_text_classifier_preprocessor
from kerasbert.preprocessing import elmo_token_classifier_preprocessor
from kerasbert.preprocessing import multiple_choice_preprocessor
from kerasbert.preprocessing import question_answerer_preprocessor
from kerasbert.preprocessing import text2text_preprocessor
from kerasbert.preprocessing import text_classifier_preprocessor
from kerasbert.preprocessing import token_classifier_preprocessor
from kerasbert.tasks import bert_pretrainer
from kerasbert.tasks import causal_lm
from kerasbert.tasks import distiller
from kerasbert.tasks import electra_pretrainer
from kerasbert.tasks import elmo_pretrainer
from kerasbert.tasks import gpt_classifier
from kerasbert.tasks import multiple_choice
from kerasbert.tasks import pearson_correlation
from kerasbert.tasks import question_answerer
from kerasbert.tasks import sentence_encoder
from kerasbert.tasks import seq2seq_lm
from kerasbert.tasks import text_classifier
from kerasbert.tasks import token_accuracy
from kerasbert.tasks import token_classifier
from kerasbert.errors import UsageError

# Every module that registers a Keras class, imported above: importing this
# module registers them all. tests/test_saving.py checks this tuple against
# the `register_keras_serializable` decorators in the package, so a new
# class cannot be forgotten here.
SERIALIZABLE_MODULES = (
    attention,
    axial_position_embedding,
    block_sparse_attention,
    character_cnn,
    chunked_feed_forward,
    embeddings,
    fast_dropout,
    fused_dense,
    fused_layer_norm,
    gated_feed_forward,
    highway,
    initializers,
    local_attention,
    lsh_attention,
    masked_lm_head,
    pooler,
    position_embedding,
    pre_norm_branch,
    projected_lstm,
    reversible_sequence,
    rotary_embedding,
    scalar_mix,
    sentence_head,
    sentence_pooling,
    sinusoidal_position_encoding,
    transformer_block,
    transformer_decoder_block,
    albert_backbone,
    bert_backbone,
    big_bird_backbone,
    distil_bert_backbone,
    electra_backbone,
    elmo_backbone,
    gpt_backbone,
    modernbert_backbone,
    modernbert_block,
    reformer_backbone,
    roberta_backbone,
    transformer_backbone,
    bert_optimizers,
    schedules,
    elmo_text_classifier_preprocessor,
    elmo_token_classifier_preprocessor,
    multiple_choice_preprocessor,
    question_answerer_preprocessor,
    text2text_preprocessor,
    text_classifier_preprocessor,
    token_classifier_preprocessor,
    bert_pretrainer,
    causal_lm,
    distiller,
    electra_pretrainer,
    elmo_pretrainer,
    gpt_classifier,
    multiple_choice,
    pearson_correlation,
    question_answerer,
    sentence_encoder,
    seq2seq_lm,
    text_classifier,
    token_accuracy,
    token_classifier,
)

# Failures that come from the file, not from kerasbert: a refusal by safe
# mode, a class of another library or of a newer kerasbert, a file that is
# not a Keras archive. Anything else is a bug and keeps its traceback.
_FILE_PROBLEMS = (
    "safe_mode", "Could not locate", "File format not supported", "Could not deserialize",
    "not a zip file", "Unable to synchronously open", "truncated", "Invalid filepath",
)


def register_all():
    """Registers every kerasbert class with Keras (importing this module
    did; kept so `kerasbert.register_all()` reads as what it ensures)."""
    return SERIALIZABLE_MODULES


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
