"""`run_finetuning(config)` and `run_evaluation(...)`: the runs behind
`kerasbert finetune` and `kerasbert evaluate`.

    backbone (.keras run output, or preset + original TF1 checkpoint)
      -> task examples (TFDS / local files) or cached features (--features)
      -> features (kerasbert.data.finetuning) -> task model for the type
      -> model.fit with the BERT fine-tuning optimizer (warm-up ratio,
         linear decay, optional layer-wise decay)
      -> task metrics on the validation data (kerasbert.metrics)

Fine-tuning directory:
    FT/model.keras              the fine-tuned task model
    FT/config.json              task type, label names, max length, casing,
                                task spec and columns, QA options; an ELMo
                                run (no --vocab: its preprocessor reads
                                characters) names its "input" instead of a
                                tokenizer and has no tokenizer files
    FT/vocab.txt                a copy of the tokenizer files (FT is self-contained):
                                vocab.txt (WordPiece), or sentencepiece.model
                                (ALBERT), or vocab.json + merges.txt (RoBERTa);
                                config.json "tokenizer" says which
    FT/metrics.json             validation metrics (and the baseline)
    FT/training_curve.png       loss (and the main metric) per epoch
    FT/confusion_matrix.png     classification tasks
"""

import atexit
import dataclasses
import math
import os
import shutil
import sys
import tempfile

import numpy as np

import keras

from kerasbert.data.finetuning import has_split
from kerasbert.data.finetuning import load_task
from kerasbert.data.finetuning import make_dataset
from kerasbert.data.finetuning import read_features
from kerasbert.data.finetuning.load import parse_task_spec
from kerasbert.data.finetuning.task_formats import task_format
from kerasbert.errors import UsageError
from kerasbert.io_utils import atomic_write_text
from kerasbert.models import presets
from kerasbert import runs
from kerasbert.tasks import task_types
from kerasbert.loading.backbones import load_backbone_from_flags as load
from kerasbert.loading.published import apply_overrides
from kerasbert.text import ids_settings
from kerasbert.text import load_tokenizer
from kerasbert.text import tokenizer_files
from kerasbert.text.character_tokenizer import given_token_options
from kerasbert.text.character_tokenizer import refuse_token_options
from kerasbert.text.tokenizer_loading import SWITCHES
from kerasbert.optimizers import recipes
from kerasbert.tasks.preprocessor_factory import backbone_tokenizer
from kerasbert.tasks.preprocessor_factory import build_preprocessor
from kerasbert.tasks.preprocessor_factory import preprocessor_from_run
from kerasbert.training.best_epoch import BestEpoch
from kerasbert.training.finetune_plots import plot_confusion_matrix
from kerasbert.training.finetune_plots import plot_curves
from kerasbert.training.loop import progress_verbosity
from kerasbert.training.configs import FinetuneConfig
from kerasbert.training.strategies import resolve_strategy
from kerasbert.training.strategies import split_cpu
from kerasbert.training.strategies import worker_info

# --- pieces -----------------------------------------------------------------


def vocab_tokenizer(config):
    """The tokenizer --vocab names (--lower-case and the switches applied);
    None without --vocab: the backbone brings its own (`load_backbone`)."""
    if config.vocab is None:
        return None
    return load_tokenizer(config.vocab, lower_case=config.lower_case,
                          **{name: getattr(config, name) for name in SWITCHES})


def load_backbone(config, tokenizer):
    """(backbone, tokenizer): the backbone to fine-tune
    (kerasbert.loading.backbones), checked against --vocab's tokenizer;
    without --vocab, with the tokenizer it needs no files for (ELMo's
    characters, `CharacterTokenizer`)."""
    flags = (config.backbone, config.preset, config.init_checkpoint, config.bert_config)
    if config.vocab is None:
        backbone = load(*flags)
        tokenizer = backbone_tokenizer(backbone)
        if tokenizer is None:
            raise UsageError("Give --vocab: the tokenizer files of the backbone (only an ELMo "
                             "model reads characters without one).")
        refuse_token_options(model_name(config), given_token_options(
            {name: getattr(config, name) for name in SWITCHES}))
        return in_policy(backbone, config), tokenizer
    vocab_size = tokenizer.vocabulary_size
    try:
        backbone = load(*flags, vocabulary_size=vocab_size,
                        added_tokens=len(getattr(tokenizer, "added_ids", ())))
    except UsageError:
        if backbone_tokenizer(load(*flags)) is not None:  # the override's error hides this
            refuse_token_options(model_name(config), [f"--vocab {config.vocab}"])
        raise
    if backbone.vocabulary_size != vocab_size:
        raise UsageError(f"The backbone has a vocabulary of {backbone.vocabulary_size} tokens but "
                         f"--vocab {config.vocab} has {vocab_size}.")
    return in_policy(backbone, config), tokenizer


def model_name(config):
    """The model as the command line named it."""
    return config.preset or config.backbone or config.init_checkpoint


def in_policy(backbone, config):
    """The backbone under --precision (the task model and its optimizer
    follow its policy), weights unchanged."""
    if backbone.dtype_policy.name == config.precision:
        return backbone
    return apply_overrides(backbone, config.preset or config.backbone, config.precision)


def describe_model(config):
    """(backbone class, num_layers, hidden_dim, task type name) of a
    fine-tuning config, for a search to choose its grid and metric before
    any trial runs.

    Raises:
        UsageError: no validation data to score trials on."""
    has_dev = (has_split(config.features, "validation") if config.features
               else _split_spec(config.task, config.validation)[0] is not None)
    if not has_dev:
        raise UsageError("--search scores every trial on validation data: give --validation "
                         "(a file or a split), or a task that has a validation split.")
    backbone, tokenizer = load_backbone(config, vocab_tokenizer(config))
    if config.features:
        features = read_features(config.features, "train",
                                 vocab_file=_fingerprinted_file(tokenizer),
                                 tokenizer_settings=ids_settings(tokenizer))
        check_features_length(config, features)
        task_type = features.task_type
    else:
        task_type = load_task(config.task, "train", task_type=config.task_type,
                              columns=config.columns or None).task_type
    described = (type(backbone), backbone.num_layers, backbone.hidden_dim, task_type)
    keras.backend.clear_session()
    return described


def resolve_hyperparameters(config, backbone):
    """Fills the fine-tuning flags the user left out from `--recipe` or the
    backbone's size default (`kerasbert.optimizers.recipes`), prints what was
    chosen and why, warns about a learning rate far outside the family's
    range, and returns the description config.json keeps."""
    family = presets.family_of(type(backbone))
    given = {flag: getattr(config, flag) for flag in recipes.FIELDS}
    published = recipes.is_published_checkpoint(config.preset or config.init_checkpoint)
    values, recipe, taken = recipes.resolve(given, family, backbone.num_layers,
                                            backbone.hidden_dim, config.recipe, published)
    for flag, value in values.items():
        setattr(config, flag, value)
    given_flags = [flag for flag in recipes.FIELDS if given[flag] is not None]
    origin = f"recipe {recipe.name}" if config.recipe else "this model's defaults"
    print(f"fine-tuning values from {origin}"
          + (f" (given on the command line: {', '.join(given_flags)})" if given_flags else "")
          + ":")
    print(recipe.describe(values))
    warning = recipes.rate_warning(family, config.learning_rate)
    if warning:
        print(warning, file=sys.stderr)
    return {"name": recipe.name, "source": recipe.source, "why": recipe.why,
            "from_recipe": taken, "values": values}


def _split_spec(task, validation, flag="--validation"):
    """(spec, split) of the validation data: a file given with --validation
    (same kind as the task), a split name, or the task's validation split;
    `flag` is the option a missing file is named by."""

    kind, _ = parse_task_spec(task)
    if validation is None:
        return (task, "validation") if kind == "tfds" else (None, None)
    if os.path.exists(validation):
        return (validation if kind == "tfds" else f"{kind}:{validation}"), "validation"
    if kind != "tfds":
        raise UsageError(f"{flag} {validation}: file not found.")
    return task, validation


def task_features(config, tokenizer, split, label_names=None, spec=None, preprocessor=None):
    """(TaskData or None, TaskFeatures) of one split: the cached --features
    (their tokenizer checked), or the examples made into features by the
    model's `preprocessor` (`TaskPreprocessor.task_features`)."""

    if config.features:
        return None, read_features(config.features, split, vocab_file=_fingerprinted_file(tokenizer),
                                   tokenizer_settings=ids_settings(tokenizer))
    data = load_task(spec or config.task, split, task_type=config.task_type,
                     columns=config.columns or None, label_names=label_names)
    return data, preprocessor.task_features(data)


def check_features_length(config, features):
    """--features are token ids packed to one length: a --max-seq-length
    other than theirs cannot be honoured, and is refused (not ignored)."""
    if config.sequence_length is not None and config.sequence_length != features.sequence_length:
        raise UsageError(
            f"--max-seq-length {config.sequence_length} differs from the length of the "
            f"--features {config.features} ({features.sequence_length} tokens): leave it out, "
            f"or make the features again with create-finetuning-data --max-seq-length "
            f"{config.sequence_length}.")


def training_data(config, tokenizer):
    """(TaskData or None, TaskData or TaskFeatures) of the training split:
    the raw examples (the model's preprocessor tokenizes them while it
    trains), or with --features the cached features (then no examples)."""
    if config.features:
        train = read_features(config.features, "train", vocab_file=_fingerprinted_file(tokenizer),
                              tokenizer_settings=ids_settings(tokenizer))
        if train.y is None:
            raise UsageError(f"{config.features}: the training features have no labels.")
        check_features_length(config, train)
        return None, train
    data = load_task(config.task, "train", task_type=config.task_type,
                     columns=config.columns or None)
    if not data.has_labels:
        raise UsageError(f"{config.task}: the training data has no labels.")
    return data, data


def _preprocessor(model, tokenizer, task_type, train, sequence_length, config):
    """The task model's preprocessor for this run (the one factory,
    `kerasbert.tasks.preprocessor_factory`): its tokenizer, packed length,
    label names, batching and (QA) windowing flags."""
    options = {name: getattr(config, name) for name in model.preprocessor_class.options
               if hasattr(config, name)}
    return build_preprocessor(model, tokenizer, task_type.name, sequence_length,
                              train.label_names, padding=config.padding,
                              bucket_by_length=config.bucket_by_length, **options)


def fit_inputs(model, config, train, train_data, valid):
    """(x, y, validation dataset) for the run's `fit`: the raw examples (the
    model's preprocessor tokenizes them in tf.data) or, with --features, the
    cached token ids, batched as raw text's are (cut to each batch's longest
    row unless the step needs one shape: `Task.batch_padding`)."""
    padding = model.batch_padding()
    if train_data is None:  # --features: token ids made by create-finetuning-data
        train_x = make_dataset(train, config.batch_size, shuffle=True, seed=config.seed,
                               bucket_by_length=config.bucket_by_length, padding=padding)
        train_y = None
    else:
        train_x, train_y = model.preprocessor.inputs_of(train_data)
        if train_y is None:
            raise UsageError(f"{config.task}: the training data has no labels.")
    valid_ds = make_dataset(valid, config.batch_size, padding=padding) if valid is not None \
        else None
    return train_x, train_y, valid_ds


def _fingerprinted_file(tokenizer):
    """The file whose sha256 cached features record (the vocabulary)."""

    return tokenizer_files(tokenizer)[0]


def _has_unanswerable(task, *datasets):
    """SQuAD v2.0-style data: some questions have no answer. Decides how an
    exported QA model decodes (with or without the no-answer threshold)."""
    for data in datasets:
        if data is not None and task_format(data.task_type).example == "squad":
            return any(ex.get("is_impossible") for ex in data.examples)
    return "v2" in str(task)


def _finite(value):
    return None if isinstance(value, float) and not math.isfinite(value) else value


# --- the runs -----------------------------------------------------------------


def _worker_config(config, strategy):
    """(config, is_chief). --strategy multi_worker (TF_CONFIG): every worker
    trains and saves (its variables are read collectively), but only the
    chief writes --output-dir; the others write into a scratch folder,
    removed when the run ends, as pretrain's workers do."""
    is_chief = worker_info(strategy)[0]
    if is_chief:
        return config, True
    scratch = tempfile.mkdtemp(prefix="kerasbert-finetune-worker-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return dataclasses.replace(config, output_dir=scratch), False


def validation_features(config, tokenizer, task_type):
    """(valid TaskData or None, valid TaskFeatures or None, spec, split).
    --features: the cached validation split when there is one (one that is
    corrupt or truncated is an error naming the file and record); raw
    examples: only where they are (spec, split), made into features by the
    model's preprocessor once it is built (`task_features`)."""
    spec, split, valid = None, None, None
    if config.features:
        if has_split(config.features, "validation"):
            valid = read_features(config.features, "validation",
                                  vocab_file=_fingerprinted_file(tokenizer),
                                  tokenizer_settings=ids_settings(tokenizer))
        if task_type.needs_examples and valid is not None:
            raise UsageError(f"{task_type.name} metrics need the raw validation examples (for "
                             "QA, contexts and answers): give --validation with --features.")
    else:
        spec, split = _split_spec(config.task, config.validation)
    if config.early_stopping and valid is None and spec is None:
        raise UsageError("--early-stopping needs validation data (--validation, or a task "
                         "with a validation split).")
    return None, valid, spec, split


def build_task_model(config, tokenizer, task_type, train, sequence_length):
    """(model, recipe description): the backbone (frozen with
    --freeze-backbone), the task model with its preprocessor, compiled as a
    Python user's (`Task.compile_with_recipe`: fit sizes the schedule from
    the batches of the first epoch). Call in the strategy's scope."""
    backbone, tokenizer = load_backbone(config, tokenizer)
    if config.freeze_backbone and hasattr(backbone, "freeze"):
        backbone.freeze()  # ELMo: the biLM stops, its scalar mix still trains
    elif config.freeze_backbone:  # the feature-based use: only the head trains
        backbone.trainable = False
    recipe = resolve_hyperparameters(config, backbone)
    model = task_type.build_model(backbone, train, config.dropout,
                                  extract_id=getattr(tokenizer, "mask_id", None),
                                  lm_weight=config.lm_weight)
    model.preprocessor = _preprocessor(model, tokenizer, task_type, train, sequence_length,
                                       config)
    model.compile_with_recipe(recipes.Recipe(
        "run", config.learning_rate, config.batch_size, config.epochs,
        warmup_ratio=config.warmup_ratio, weight_decay=config.weight_decay,
        layerwise_lr_decay=config.layerwise_lr_decay))
    return model, recipe


def _task_config(config, model, task_type, train, data, recipe):
    """config.json of the run (`runs.save_run` adds the tokenizer's entry)."""
    train_data, valid_data, spec, split, options = data
    return {
        "task": config.task, "task_type": task_type.name, "label_names": train.label_names,
        # The data's files relative to the run (`evaluate` reads them from anywhere).
        "task_source": runs.portable_spec(config.task, config.output_dir),
        "validation_source": ({"spec": runs.portable_spec(spec, config.output_dir),
                               "split": split} if spec else None),
        "max_seq_length": model.preprocessor.sequence_length,
        "lower_case": bool(getattr(model.preprocessor.tokenizer, "lower_case", False)),
        "columns": config.columns, "model_class": type(model).__name__,
        "qa": dict(options, doc_stride=config.doc_stride, max_query_length=config.max_query_length,
                   version_2_with_negative=_has_unanswerable(config.task, train_data, valid_data)),
        "finetune": dataclasses.asdict(config), "backbone": model.backbone.get_config(),
        "recipe": recipe,
        "train_stats": getattr(train, "stats", {"num_examples": len(train_data or ())}),
    }


def _write_results(config, model, task_type, valid_data, valid, options, history, selection):
    """metrics.json (and the confusion matrix) on the validation data, and
    the training curve; returns (metrics, {output name: path})."""
    outputs, result_metrics = {}, {}
    if valid is not None:
        predictions = task_type.predict_outputs(model, valid, config.batch_size)
        result_metrics = task_type.evaluate(config.task, valid_data, valid, predictions, options)
        result_metrics = {k: _finite(v) for k, v in result_metrics.items()}
        if task_type.confusion_matrix:
            outputs["confusion_matrix"] = runs.run_path(config.output_dir, runs.CONFUSION_MATRIX)
            plot_confusion_matrix(valid.y, np.asarray(predictions).argmax(-1),
                                  valid.label_names, outputs["confusion_matrix"])
    outputs["metrics"] = runs.write_json(config.output_dir, runs.METRICS, {
        "validation": result_metrics, "history": history,
        "selection": selection.summary() if selection else None,
        "validation_examples": None if valid is None else len(valid)})
    outputs["training_curve"] = runs.run_path(config.output_dir, runs.CURVE)
    plot_curves(history, outputs["training_curve"])
    return result_metrics, outputs


def run_finetuning(config):
    """Fine-tunes; returns {"metrics", "outputs", "history"}."""
    config.validate()
    split_cpu(config.logical_cpus)
    keras.utils.set_random_seed(config.seed)
    strategy = resolve_strategy(config.strategy)
    config, is_chief = _worker_config(config, strategy)
    # No --vocab: an ELMo biLM (config.validate allows it only for one),
    # whose CharacterTokenizer comes with its backbone (`load_backbone`).
    tokenizer = vocab_tokenizer(config)
    train_data, train = training_data(config, tokenizer)
    task_type = task_types.get(train.task_type)
    valid_data, valid, spec, split = validation_features(config, tokenizer, task_type)
    sequence_length = train.sequence_length if train_data is None else config.sequence_length
    with strategy.scope():
        model, recipe = build_task_model(config, tokenizer, task_type, train, sequence_length)
    if spec:  # raw validation examples: the features of the model's own preprocessor
        valid_data, valid = task_features(config, tokenizer, split, train.label_names, spec,
                                          model.preprocessor)
    options = dict(max_answer_length=config.max_answer_length,
                   null_score_diff_threshold=config.null_score_diff_threshold)
    train_x, train_y, valid_ds = fit_inputs(model, config, train, train_data, valid)
    selection = None
    if valid is not None:
        # The epoch kept is the one with the best dev metric, not the last.
        selection = BestEpoch(
            lambda: task_type.evaluate(config.task, valid_data, valid,
                                       task_type.predict_outputs(model, valid, config.batch_size),
                                       options),
            task_type.selection_metric(config.task), patience=config.early_stopping)
    history = model.fit(train_x, train_y, batch_size=None if train_data is None else config.batch_size,
                        epochs=config.epochs, validation_data=valid_ds, seed=config.seed,
                        callbacks=[selection] if selection else [],
                        verbose=progress_verbosity(config.progress)).history
    task_config = _task_config(config, model, task_type, train,
                               (train_data, valid_data, spec, split, options), recipe)
    # The folder appears only now: a run that fails earlier leaves nothing.
    saved = runs.save_run(config.output_dir, {runs.MODEL: model}, model.preprocessor.tokenizer,
                          task_config)
    result_metrics, outputs = _write_results(config, model, task_type, valid_data, valid,
                                             options, history, selection)
    outputs.update(model=saved[runs.MODEL], config=saved[runs.CONFIG])
    if not is_chief:
        shutil.rmtree(config.output_dir, ignore_errors=True)
    return {"metrics": result_metrics, "outputs": outputs, "history": history,
            "task_type": task_type.name, "is_chief": is_chief}


def run_evaluation(model_dir, task=None, split=None, batch_size=32, columns=None,
                   predictions_file=None):
    """Metrics of a fine-tuned model (FT dir) on a split or a file: by
    default the run's own validation data (the file or split it was
    fine-tuned with, found from any working directory). `predictions_file`:
    a text file to write the model's outputs to, one line per example (task
    types whose outputs are text: text2text)."""

    run = runs.open_finetuned(model_dir)
    saved = run.config
    task_type = task_types.get(saved["task_type"])
    if predictions_file is not None and not task_type.format.generates_text:
        raise UsageError(f"--predictions writes generated text; {model_dir} is a "
                         f"{task_type.name} model, whose outputs are not text.")
    tokenizer = run.tokenizer()  # ELMo: its CharacterTokenizer
    # A run keeps its files' paths relative to itself (older runs: as given).
    own_task = (runs.located_spec(saved["task_source"], model_dir)
                if saved.get("task_source") else saved["task"])
    run_config = FinetuneConfig(task=task or own_task, output_dir=model_dir,
                                vocab=next(iter(tokenizer_files(tokenizer)), None),
                                backbone=None, task_type=saved["task_type"],
                                columns=columns or saved.get("columns") or {},
                                sequence_length=saved["max_seq_length"],
                                # text2text: the gold targets cut as in training
                                target_length=(saved.get("finetune") or {}).get("target_length"),
                                doc_stride=saved["qa"]["doc_stride"],
                                max_query_length=saved["qa"]["max_query_length"])
    source = saved.get("validation_source")
    is_file = parse_task_spec(run_config.task)[0] != "tfds"
    if task is None and split is None and source:
        spec, split_name = runs.located_spec(source["spec"], model_dir), source["split"]
    elif split is None and is_file:
        # --task FILE: the file is the data; none given: the run kept none
        spec, split_name = (task, "validation") if task is not None else (None, None)
    else:
        spec, split_name = _split_spec(run_config.task, split or "validation", flag="--split")
    if spec is None:
        raise UsageError(f"{model_dir} was fine-tuned without validation data: give --split "
                         "FILE (a file of the task's format) or --task.")
    model = run.load_model(runs.MODEL)
    # The run's preprocessor as config.json records it (the one factory).
    preprocessor = preprocessor_from_run(model, run, tokenizer)
    data, features = task_features(run_config, tokenizer, split_name, saved["label_names"], spec,
                                   preprocessor)
    predictions = task_type.predict_outputs(model, features, batch_size)
    result = task_type.evaluate(run_config.task, data, features, predictions, saved["qa"])
    if predictions_file is not None:
        lines = task_type.written_predictions(predictions)
        atomic_write_text(predictions_file, "".join(f"{line}\n" for line in lines))
    return {k: _finite(v) for k, v in result.items()}
