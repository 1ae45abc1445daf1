"""`kerasbert finetune` on an ELMo biLM (no --vocab): the task's ELMo
preprocessor reads raw words/texts into character ids, the task model
trains on them (`--freeze-backbone`: the head and the scalar mix only),
each epoch is scored on the validation data with the task type's metrics
(`BestEpoch` keeps the best), and the run directory holds model.keras,
config.json and metrics.json (no tokenizer files: ELMo reads characters).

Not here yet: --features (token ids), `evaluate` and `export` of the run.
"""

import dataclasses
import types

import keras
import numpy as np

from kerasbert import runs
from kerasbert.data.finetuning import load_task
from kerasbert.errors import UsageError
from kerasbert.loading.backbones import load_backbone_from_flags
from kerasbert.optimizers import recipes
from kerasbert.preprocessing.elmo_inputs import elmo_preprocessor
from kerasbert.tasks import task_types
from kerasbert.training.best_epoch import BestEpoch
from kerasbert.training.loop import progress_verbosity


def is_elmo(backbone):
    """A backbone that reads characters (`input_char_ids`)."""
    return "input_char_ids" in backbone.input


def word_features(preprocessor, data):
    """(x, features) of labelled examples for the task type's metrics
    (`task_evaluation`): features.y holds the label ids (tagging: [N, T],
    one per word, the words past T dropped as `decode_word_labels` drops a
    sub-word model's cut words), features.extras["word_ids"] each
    position's word (-1 at padding)."""
    x, y = preprocessor.inputs_of(data)
    extras = {}
    if preprocessor.format.example == "words":
        length = preprocessor.sequence_length
        labels = np.zeros((len(y), length), np.int32)
        words = np.full((len(y), length), -1, np.int64)
        for i, tags in enumerate(y):
            kept = min(len(tags), length)
            labels[i, :kept] = preprocessor.label_ids(tags[:kept], where=f"example {i} tag")
            words[i, :kept] = np.arange(kept)
        extras["word_ids"] = words
    elif preprocessor.format.float_labels:
        labels = np.asarray(y, np.float32)
    else:
        labels = preprocessor.label_ids(y)
    return x, types.SimpleNamespace(y=labels, label_names=preprocessor.label_names,
                                    extras=extras)


def run_elmo_finetuning(config, resolve_hyperparameters, plot_curves, split_spec):
    """`run_finetuning` for an ELMo backbone (config.vocab is None); the
    callables are `training.finetune`'s. Returns its result dict."""
    keras.utils.set_random_seed(config.seed)
    backbone = load_backbone_from_flags(config.backbone, config.preset, config.init_checkpoint,
                                        config.bert_config)
    if not is_elmo(backbone):
        raise UsageError("Give --vocab: the tokenizer files of the backbone (only an ELMo "
                         "model reads characters without one).")
    data = load_task(config.task, "train", task_type=config.task_type,
                     columns=config.columns or None)
    if not data.has_labels:
        raise UsageError(f"{config.task}: the training data has no labels.")
    task_type = task_types.get(data.task_type)
    if config.freeze_backbone:
        backbone.freeze()
    recipe = resolve_hyperparameters(config, backbone)
    model = task_type.build_model(backbone, data, config.dropout)
    elmo_class = elmo_preprocessor(model.preprocessor_class)
    if elmo_class is None or task_type.format.text_pair:
        raise UsageError(f"ELMo takes tagging and single-text classification tasks, not "
                         f"{task_type.name}.")
    arguments = model.preprocessor_arguments()
    if task_type.name in elmo_class.task_types and "task_type" not in arguments:
        arguments["task_type"] = task_type.name
    model.preprocessor = elmo_class(None, config.sequence_length or
                                    task_type.format.sequence_length, data.label_names,
                                    max_characters=backbone.max_characters_per_token,
                                    **arguments)
    model.compile_with_recipe(recipes.Recipe(
        "run", config.learning_rate, config.batch_size, config.epochs,
        warmup_ratio=config.warmup_ratio, weight_decay=config.weight_decay,
        layerwise_lr_decay=config.layerwise_lr_decay))
    spec, split = split_spec(config.task, config.validation)
    if config.early_stopping and spec is None:
        raise UsageError("--early-stopping needs validation data (--validation, or a task "
                         "with a validation split).")
    callbacks, valid_data, valid = [], None, None
    if spec is not None:
        valid_data = load_task(spec, split, task_type=task_type.name,
                               columns=config.columns or None, label_names=data.label_names)
        valid_x, valid = word_features(model.preprocessor, valid_data)

        def score():
            inputs = model.preprocessor.dataset(valid_x, batch_size=config.batch_size)
            outputs = model.predict(inputs, verbose=0)
            return task_type.evaluate(config.task, valid_data, valid, outputs, {})

        callbacks.append(BestEpoch(score, task_type.selection_metric(config.task),
                                   patience=config.early_stopping))
    x, y = model.preprocessor.inputs_of(data)
    history = model.fit(x, y, batch_size=config.batch_size, epochs=config.epochs,
                        seed=config.seed, callbacks=callbacks,
                        verbose=progress_verbosity(config.progress)).history
    result_metrics = (callbacks[0].best_metrics or {}) if callbacks else {}
    task_config = {
        "task": config.task, "task_type": task_type.name, "label_names": data.label_names,
        "task_source": runs.portable_spec(config.task, config.output_dir),
        "validation_source": ({"spec": runs.portable_spec(spec, config.output_dir),
                               "split": split} if spec else None),
        "max_seq_length": model.preprocessor.sequence_length,
        "lower_case": False, "columns": config.columns, "model_class": type(model).__name__,
        "finetune": dataclasses.asdict(config), "backbone": backbone.get_config(),
        "recipe": recipe, "train_stats": {"num_examples": len(data)},
    }
    saved = runs.save_run(config.output_dir, {runs.MODEL: model}, None, task_config)
    outputs = {"model": saved[runs.MODEL], "config": saved[runs.CONFIG],
               "training_curve": runs.run_path(config.output_dir, runs.CURVE)}
    outputs["metrics"] = runs.write_json(config.output_dir, runs.METRICS, {
        "validation": result_metrics, "history": history,
        "selection": callbacks[0].summary() if callbacks else None,
        "validation_examples": None if valid_data is None else len(valid_data)})
    plot_curves(history, outputs["training_curve"])
    return {"metrics": result_metrics, "outputs": outputs, "history": history,
            "task_type": task_type.name, "is_chief": True}
