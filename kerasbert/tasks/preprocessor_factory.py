"""THE factory of a task model's preprocessor, whatever it starts from.

    door                          caller                      the tokenizer comes from
    build_preprocessor            finetune                    the caller (explicit arguments)
    preprocessor_from_config      export_model                the caller, options as config.json's
    preprocessor_from_source      Task.from_preset            the handle's `Source` (or tokenizer=)
    preprocessor_from_run         export, evaluate            the run directory (config.json)

Every door ends in `build_preprocessor`, so a preprocessor is made one way:
the class that reads the tokenizer's output (ELMo's `CharacterTokenizer`:
the task's character counterpart, `kerasbert.preprocessing.readers`), the
packed length checked once against the backbone (`preprocessing.lengths.
packed_length`, defaults from the task formats' table), the model's own
arguments (`Task.preprocessor_arguments`) and the task options (QA's
windows, text2text's target length). Serving then takes that
preprocessor's tokenizer and packer (`kerasbert.serving.exporter`).

Plain Python at import: task modules import this under any Keras backend;
the preprocessor classes (TensorFlow) load when one is built.
"""

import keras

from kerasbert.errors import UsageError
from kerasbert.preprocessing.lengths import check_target_length
from kerasbert.preprocessing.lengths import packed_length
from kerasbert.text import load_tokenizer
from kerasbert.text.character_tokenizer import CharacterTokenizer

#: The backbone input that says a model reads characters, not token ids.
CHARACTER_INPUT = "input_char_ids"


def backbone_tokenizer(backbone):
    """The tokenizer a backbone needs no files for: ELMo's characters
    (`CharacterTokenizer`); None for a backbone that reads token ids."""
    try:
        names = backbone.input or {}
    except (AttributeError, ValueError):  # a layer never called on inputs
        names = {}
    return CharacterTokenizer.for_backbone(backbone) if CHARACTER_INPUT in names else None


def preprocessor_class(model, tokenizer, task_type):
    """The preprocessor class that packs `tokenizer`'s output for `model`."""
    # lazy: tensorflow (the preprocessors run in tf.data; task models import
    # this module under any backend)
    from kerasbert.preprocessing.readers import preprocessor_for

    return preprocessor_for(model.preprocessor_class, tokenizer, task_type)


def build_preprocessor(model, tokenizer, task_type=None, sequence_length=None, label_names=None,
                       **options):
    """A task model's preprocessor from explicit arguments.

    Args:
        model: a `kerasbert.tasks` model (its `preprocessor_class`,
            `preprocessor_arguments()` and backbone).
        tokenizer: a `kerasbert.text` tokenizer or a `CharacterTokenizer`.
        task_type: the task type name; None: the class's default (text
            classification decides single texts or pairs from its data).
        sequence_length: T; None: the task type's default, at most the
            backbone's positions (`packed_length`, the one check).
        label_names: class / tag names in id order, or None.
        **options: the preprocessor's own options (`cls.options`: QA's
            doc_stride ..., text2text's target_length) and batching options
            (`cls.batch_options`).

    Returns:
        The preprocessor (a `TaskPreprocessor`).
    """
    kind = task_type or model.preprocessor_class.task_types[0]
    cls = preprocessor_class(model, tokenizer, kind)
    if options.get("target_length") is not None:
        options["target_length"] = check_target_length(options["target_length"], model.backbone)
    arguments = {**model.preprocessor_arguments(), **options}
    if task_type is not None:
        arguments["task_type"] = task_type
    length = packed_length(model.backbone, arguments.get("task_type", kind), sequence_length)
    return cls(tokenizer, length, label_names, **arguments)


def preprocessor_options(cls):
    """The keyword arguments a preprocessor class takes beyond the common
    ones (its `options` and `batch_options`), which `from_preset` passes on."""
    return (tuple(getattr(cls, "batch_options", ()))
            + tuple(getattr(cls, "options", ())))


# --- from a handle --------------------------------------------------------------


def source_tokenizer(handle, found):
    """The tokenizer that comes with a resolved handle, or None (a built-in
    preset has no vocabulary)."""
    if found.is_preset:
        return None
    if found.is_ours and not found.is_run:  # a .keras file: its preprocessor's
        model = keras.saving.load_model(found.path, compile=False)
        preprocessor = getattr(model, "preprocessor", None)
        return None if preprocessor is None else preprocessor.tokenizer
    try:
        return load_tokenizer(found)
    except UsageError:
        if found.is_published:
            raise
        return None  # e.g. a run directory whose vocabulary lives elsewhere: tokenizer=


def handle_tokenizer(handle, found, backbone, tokenizer=None):
    """The tokenizer `from_preset` attaches: `tokenizer` (an object or a
    path), else the handle's, else the one the backbone needs no files for
    (ELMo); checked against the backbone's embedding table. None when there
    is none (a built-in preset of a token-id family)."""
    if tokenizer is not None and not hasattr(tokenizer, "tokenize_ids"):
        tokenizer = load_tokenizer(tokenizer)  # a path
    if tokenizer is None:
        tokenizer = source_tokenizer(handle, found)
    if tokenizer is None:
        tokenizer = backbone_tokenizer(backbone)
    size = getattr(backbone, "vocabulary_size", None)
    if tokenizer is not None and size is not None and tokenizer.vocabulary_size != size:
        raise UsageError(f"The tokenizer has {tokenizer.vocabulary_size} tokens but the backbone's "
                         f"embedding table has {size}: they are not one model's.")
    return tokenizer


def preprocessor_from_source(model, tokenizer, sequence_length=None, label_names=None,
                             **options):
    """`Task.from_preset`'s preprocessor: `build_preprocessor` on the
    handle's tokenizer (`handle_tokenizer`), its label names fixed against
    the head. None when there is no tokenizer or the task has no
    preprocessor class."""
    if tokenizer is None or model.preprocessor_class is None:
        return None
    preprocessor = build_preprocessor(model, tokenizer, None, sequence_length, label_names,
                                      **options)
    if label_names is not None:
        preprocessor.set_label_names(label_names, model.num_label_names())
    return preprocessor


# --- from a run directory -------------------------------------------------------


def preprocessor_from_run(model, run, tokenizer=None, sequence_length=None, target_length=None):
    """The preprocessor a fine-tuning run's config.json describes.

    Args:
        model: the run's task model.
        run: a `kerasbert.runs.Run` (its `config` and `tokenizer()`).
        tokenizer: the run's tokenizer with switches overridden; default
            `run.tokenizer()`.
        sequence_length: T over the run's own (`export --seq-length`).
        target_length: text2text: the longest generation, over the run's.
    """
    tokenizer = run.tokenizer() if tokenizer is None else tokenizer
    return preprocessor_from_config(model, tokenizer, run.config, sequence_length, target_length)


def preprocessor_from_config(model, tokenizer, config, sequence_length=None, target_length=None):
    """`preprocessor_from_run` on a config.json dict: "task_type",
    "label_names", "max_seq_length" (T unless `sequence_length`), the QA
    options under "qa" (SQuAD v2 from the task's name when the run did not
    record it), text2text's target length under "finetune"."""
    task_type = config["task_type"]
    cls = preprocessor_class(model, tokenizer, task_type)
    options = {name: value for name, value in (config.get("qa") or {}).items()
               if name in cls.options}
    if target_length is not None and "target_length" not in cls.options:
        raise UsageError(f"--max-target-length applies to text2text models, not to a "
                         f"{task_type} model.")
    if "target_length" in cls.options:
        options["target_length"] = (target_length
                                    or (config.get("finetune") or {}).get("target_length"))
    if "version_2_with_negative" in cls.options and "version_2_with_negative" not in options:
        options["version_2_with_negative"] = "v2" in str(config.get("task", ""))
    return build_preprocessor(model, tokenizer, task_type,
                              sequence_length or config.get("max_seq_length"),
                              config.get("label_names"), **options)


def with_sequence_length(model, preprocessor, sequence_length):
    """`preprocessor` at another packed length T (an export's
    `sequence_length`): the same tokenizer, labels and options, T checked
    against the backbone; the preprocessor itself when T is its own."""
    if sequence_length is None or int(sequence_length) == preprocessor.sequence_length:
        return preprocessor
    options = {name: getattr(preprocessor, name) for name in type(preprocessor).options
               if hasattr(preprocessor, name)}
    return build_preprocessor(model, preprocessor.tokenizer, preprocessor.task_type,
                              sequence_length, preprocessor.label_names, **options)
